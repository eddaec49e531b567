"""The project's error tree.

Every error a user can cause is one of these classes.  Each carries a stable
``code`` that travels in wire error replies and becomes the HTTP problem type, so
the mapping from class to reply is written once (xce/proto/codec.py for ZeroMQ,
xce/rest for HTTP) and nowhere else.

The wire form is ``to_wire()`` -> (code, message, fields) and ``XceError.from_wire``
back: ``fields`` names the attributes a class carries beyond its message (a
``NotLeader``'s ``leader``, a ``PermissionDenied``'s ``permission``), each with its
default as a class attribute, so an error comes back whole: same class, same
message, same fields (tests/test_wire_errors.py round-trips every class).  Imports
nothing: the fast path (xce/cli/quick.py) loads this module.
"""

from __future__ import annotations


class XceError(Exception):
    """Base class: a failure with a message meant for the user."""

    code = "error"
    http_status = 500
    fields: tuple[str, ...] = ()  # attributes that travel with the message (see to_wire)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_wire(self) -> tuple[str, str, dict[str, object]]:
        """(code, message, fields): what an error reply carries."""
        return self.code, self.message, {f: getattr(self, f) for f in self.fields}

    @staticmethod
    def from_wire(code: str, message: str, fields: dict[str, object]) -> XceError:
        """The error a reply describes, whole.  An unknown code (a newer peer) is an XceError.

        Built without the class's ``__init__``: the message arrives finished (a
        ResReqError's caret, a NotLeader's wording) and must not be formatted again.
        """
        cls = ERROR_CLASSES.get(code, XceError)
        exc = cls.__new__(cls)
        XceError.__init__(exc, message)
        for name in cls.fields:
            setattr(exc, name, fields.get(name, getattr(cls, name)))
        return exc


class InvalidRequest(XceError):
    """Input that can never be valid (bad field, bad value)."""

    code = "invalid"
    http_status = 400


class ResReqError(InvalidRequest):
    """A resource requirement string XCE cannot accept; names the offending part."""

    code = "invalid_resreq"
    fields = ("text", "pos")
    text: str = ""          # the requirement string
    pos: int | None = None  # where in it the problem is

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


class LimitReached(Conflict):
    """A request that would pass one of the site's limits (a ``pending`` cap at submit); names it."""

    code = "limit_reached"


class Infeasible(InvalidRequest):
    """A job no host of the cluster could ever run."""

    code = "infeasible"


class PermissionDenied(XceError):
    code = "forbidden"
    http_status = 403
    fields = ("permission",)
    permission: str | None = None  # the permission that was missing, when one was

    def __init__(self, message: str, permission: str | None = None) -> None:
        super().__init__(message)
        self.permission = permission


class Unauthenticated(XceError):
    code = "unauthenticated"
    http_status = 401


class NotLeader(XceError):
    """This controller is not the Raft leader; ``leader`` says where to go, if known."""

    code = "not_leader"
    http_status = 503
    fields = ("leader",)
    leader: str | None = None  # the leader's client endpoint, never a sentence

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


class LaunchDenied(XceError):
    """`xce launch` (blaunch) with a launch token that does not vouch for the job's current attempt."""

    code = "launch_denied"
    http_status = 403


class NotRunning(Conflict):
    """A request that needs the job running (RUN), made while it is in another state."""

    code = "not_running"


class NoShare(Conflict):
    """A host that holds no running share of the job (never one of its hosts, or its share there ended)."""

    code = "no_share"


ERROR_CLASSES: dict[str, type[XceError]] = {
    cls.code: cls
    for cls in (
        XceError, InvalidRequest, ResReqError, ProtocolError, NotFound, Conflict, LimitReached,
        IllegalTransition, Infeasible, PermissionDenied, Unauthenticated, NotLeader,
        Unavailable, ConfigError, LaunchDenied, NotRunning, NoShare,
    )
}
