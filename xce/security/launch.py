"""The launch credential: what proves that `xce launch` (blaunch) runs inside a job.

A job's token is ``<job id>.<attempt>.<mac>``, the MAC an HMAC-SHA256 of the job id and
attempt under the cluster's *launch key*.  The leader hands it to the job in RUN_JOB
(``XCE_LAUNCH_TOKEN``) and checks it on every LAUNCH without storing anything: any
controller that becomes leader derives the same key, and a token dies with its attempt
(a requeued job runs a new attempt, and its old processes' tokens no longer pass).

The launch key is derived, never stored on its own, from a secret every controller
already shares and nobody else holds: the controllers' CURVE secret key
(``<keys>/server.key_secret``) when CURVE is on, else the Raft password of the cluster
file.  A cluster with neither (one controller, no password) gets a random key per
controller process: its tokens stop passing after that controller restarts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from xce.core.errors import InvalidRequest, LaunchDenied

_LABEL = b"xce-launch-token-v1"


def derive_key(secret: bytes | str) -> bytes:
    """The launch key from a shared secret (empty: a random key, this process's only)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    if not raw:
        return secrets.token_bytes(32)
    return hmac.new(raw, _LABEL, hashlib.sha256).digest()


def _mac(key: bytes, job_id: int, attempt: int) -> str:
    # hmac.digest: OpenSSL's one-shot path, a few times cheaper than hmac.new (once per dispatch)
    return hmac.digest(key, f"{job_id}.{attempt}".encode(), "sha256").hex()[:32]


def make_token(key: bytes, job_id: int, attempt: int) -> str:
    """The token of attempt ``attempt`` of job ``job_id``."""
    return f"{job_id}.{attempt}.{_mac(key, job_id, attempt)}"


def parse_token(token: str) -> tuple[int, int, str]:
    """(job id, attempt, mac) of a token; InvalidRequest if it is not one."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or not parts[2]:
        raise InvalidRequest("not a launch token (XCE_LAUNCH_TOKEN is set only inside a running job): "
                             f"{token[:40]!r}")
    return int(parts[0]), int(parts[1]), parts[2]


def verify_token(key: bytes, token: str) -> tuple[int, int]:
    """(job id, attempt) that ``token`` vouches for; LaunchDenied if this cluster did not issue it.
    Whether that attempt is the job's current one is the caller's to check (it knows the job)."""
    job_id, attempt, mac = parse_token(token)
    if not hmac.compare_digest(mac, _mac(key, job_id, attempt)):
        raise LaunchDenied(f"the launch token is not valid for job {job_id}: it was not issued by this cluster")
    return job_id, attempt
