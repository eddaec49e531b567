"""The project's error tree.

Every error a user can cause is one of these classes.  Each carries a stable
``code`` that travels in wire error replies and becomes the HTTP problem type, so
the mapping from class to reply is written once (xce/proto/codec.py for ZeroMQ,
xce/rest for HTTP) and nowhere else.
"""

from __future__ import annotations


class XceError(Exception):
    """Base class: a failure with a message meant for the user."""

    code = "error"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(XceError):
    """Input that can never be valid (bad field, bad value)."""

    code = "invalid"
    http_status = 400


class ResReqError(InvalidRequest):
    """A resource requirement string XCE cannot accept; names the offending part."""

    code = "invalid_resreq"

    def __init__(self, message: str, text: str = "", pos: int | None = None) -> None:
        if text and pos is not None:
            pointer = " " * pos + "^"
            message = f"{message}\n  {text}\n  {pointer}"
        super().__init__(message)
        self.text = text
        self.pos = pos


class ProtocolError(InvalidRequest):
    """A wire message that is malformed, oversized, mistyped or of an unknown version."""

    code = "protocol"


class NotFound(XceError):
    code = "not_found"
    http_status = 404


class Conflict(XceError):
    """A request that is valid but illegal in the entity's current state."""

    code = "conflict"
    http_status = 409


class IllegalTransition(Conflict):
    code = "illegal_transition"


class Infeasible(InvalidRequest):
    """A job no host of the cluster could ever run."""

    code = "infeasible"


class PermissionDenied(XceError):
    code = "forbidden"
    http_status = 403


class Unauthenticated(XceError):
    code = "unauthenticated"
    http_status = 401


class NotLeader(XceError):
    """This controller is not the Raft leader; ``leader`` says where to go, if known."""

    code = "not_leader"
    http_status = 503

    def __init__(self, leader: str | None) -> None:
        super().__init__(f"not leader; leader is {leader}" if leader else "not leader; no leader yet")
        self.leader = leader


class Unavailable(XceError):
    """The controller could not be reached or did not answer in time."""

    code = "unavailable"
    http_status = 503


class ConfigError(XceError):
    """A configuration file problem; message names file, key and reason."""

    code = "config"
    http_status = 500


ERROR_CLASSES: dict[str, type[XceError]] = {
    cls.code: cls
    for cls in (
        XceError, InvalidRequest, ResReqError, ProtocolError, NotFound, Conflict,
        IllegalTransition, Infeasible, PermissionDenied, Unauthenticated, NotLeader,
        Unavailable, ConfigError,
    )
}
