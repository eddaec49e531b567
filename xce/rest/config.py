"""xce-rest settings: one TOML file (``--config``), every key optional.

Owns only the REST server's own knobs; token trust settings (issuer, audience,
algorithms, ttl, leeway) live in the key ring (xce/security/auth.py) because every
verifier reads them, and roles live in config/rbac.toml.  An unknown key or a
bad value fails at start naming the file and key.  docs/rest.md lists every key.
"""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import msgspec

from xce.core.errors import ConfigError

PUBLIC_PATHS = ["/healthz", "/v1/auth/token", "/v1/openapi.json"]


class RestConf(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    listen: str = "127.0.0.1:7780"
    public_url: str = ""                 # how clients reach us (default http://<listen>)
    public_paths: list[str] = msgspec.field(default_factory=lambda: list(PUBLIC_PATHS))
    allow_networks: list[str] = msgspec.field(default_factory=lambda: ["127.0.0.0/8", "::1/128"])
    trusted_proxies: list[str] = []      # X-Forwarded-For is read only from these
    rate: float = 50.0                   # token bucket refill per client, requests/s
    burst: int = 100                     # bucket size
    cors_origins: list[str] = []         # exact origins, or ["*"]
    cors_max_age: int = 600
    auth_backends: list[str] = msgspec.field(default_factory=lambda: ["file"])  # "file", "pam"
    pam_roles: list[str] = msgspec.field(default_factory=lambda: ["user"])
    rbac: str = ""                       # policy file (default: config/rbac.toml)
    audit_file: str = ""                 # default <state>/auth/audit.jsonl
    audit_keep: int = 10000              # records kept in memory for GET /v1/audit
    max_body: int = 1 << 20
    pool: int = 4                        # threads (each with its own ZMQ client)
    controller_timeout: float = 10.0
    chain: bool = True                   # False: no middleware at all (benchmarks only)

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)

    @property
    def url(self) -> str:
        host, port = self.host_port
        return self.public_url or f"http://{host}:{port}"


def load_rest_conf(path: str | Path | None) -> RestConf:
    data: dict = {}
    src = str(path) if path else "<defaults>"
    if path:
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from None
    try:
        conf = msgspec.convert(data.get("rest", data), RestConf)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{src}: {e}") from None
    check(conf, src)
    return conf


def check(conf: RestConf, src: str = "<rest>") -> None:
    try:
        conf.host_port
    except ValueError:
        raise ConfigError(f"{src}: key listen: expected HOST:PORT, got {conf.listen!r}") from None
    for key in ("allow_networks", "trusted_proxies"):
        for net in getattr(conf, key):
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as e:
                raise ConfigError(f"{src}: key {key}: {e}") from None
    if conf.rate <= 0 or conf.burst < 1:
        raise ConfigError(f"{src}: keys rate/burst: must be > 0")
    if any(not p.startswith("/") for p in conf.public_paths):
        raise ConfigError(f"{src}: key public_paths: paths start with '/'")
