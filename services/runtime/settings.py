"""Typed settings read from the environment, validated at start-up.

Every service's settings class derives from `BaseServiceSettings`; variables
carry the `RAG_` prefix (e.g. `RAG_DATA_DIR`) except the two store URLs, which
keep the names operators expect (`QDRANT_URL`, `OPENSEARCH_URL`).
`load_settings` turns a validation failure into a `ConfigError` that names the
variable and the bad value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag_client.pem import ca_problem, pair_problem
from services.core.environment import ENV_PREFIX
from services.core.errors import ConfigError
from services.runtime.security.exposure import check_exposure

MiB = 1024 * 1024


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class BaseServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    host: str = Field(
        "127.0.0.1",
        description="Interface the server binds to. For a gRPC service, anything but loopback "
        "needs TLS and RAG_AUTH_CALLERS(_FILE), or RAG_ALLOW_INSECURE=true",
    )
    log_level: str = Field("INFO", description="DEBUG | INFO | WARNING | ERROR (any case)")
    log_json: bool = Field(True, description="JSON log lines (false: human-readable)")
    max_message_mb: int = Field(16, ge=1, le=256, description="gRPC max message size, MiB")
    shutdown_grace_s: float = Field(5.0, ge=0, le=120, allow_inf_nan=False)

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        # `info` and `WARN` were refused with the raw pattern as the reason (probe).
        if not isinstance(value, str):
            return value
        level = {"WARN": "WARNING"}.get(value.strip().upper(), value.strip().upper())
        if level not in LOG_LEVELS:
            raise ValueError(f"not one of {', '.join(LOG_LEVELS)}")
        return level

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * MiB


class GrpcServiceSettings(BaseServiceSettings):
    """A gRPC service's transport security and caller identity (docs/security.md)."""

    tls_cert_file: Path | None = Field(None, description="Server certificate (PEM); enables TLS")
    tls_key_file: Path | None = Field(None, description="Private key of the server certificate")
    tls_client_ca_file: Path | None = Field(
        None, description="CA bundle that client certificates must chain to (mutual TLS)"
    )
    tls_require_client_cert: bool = Field(
        False, description="Refuse connections without a client certificate signed by that CA"
    )
    auth_callers_file: Path | None = Field(
        None,
        description="Callers file (TOML/JSON: name, roles, scopes, token hashes, certificate "
        "names); re-read when it changes. Unset with RAG_AUTH_CALLERS: no caller identity",
    )
    auth_callers: SecretStr | None = Field(
        None, description="The callers list as JSON, instead of a file"
    )
    allow_insecure: bool = Field(
        False,
        description="Allow a non-loopback RAG_HOST without TLS or caller identity (a network "
        "secured otherwise, e.g. a service mesh)",
    )
    grpc_reflection: bool = Field(True, description="Serve gRPC server reflection (for grpcurl)")
    grpc_max_connections: int = Field(
        1024,
        ge=16,
        le=65536,
        description="Connections each gRPC server accepts at once; more are closed on arrival. "
        "The process's open-file limit is raised to fit its servers' bounds plus 1,024 for its "
        "own files (an error if the hard limit is lower), so idle connections cannot take the "
        "descriptors the stores need",
    )
    grpc_max_concurrent_rpcs: int = Field(
        256,
        ge=1,
        le=100_000,
        description="Calls each gRPC server runs at once; one more is refused at once with "
        "RESOURCE_EXHAUSTED, which a client may retry later (without a bound a burst of a "
        "thousand queued unseen, each past its deadline before its handler started)",
    )
    metrics_enabled: bool = Field(
        True,
        description="Serve Prometheus metrics on a listener of their own (the service's "
        "RAG_<SERVICE>_METRICS_PORT)",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        description="Address of the metrics listener (0.0.0.0 in a container, so Prometheus "
        "can scrape it; the metrics carry no secrets but are for operators)",
    )
    trace_query_text: bool = Field(
        False,
        description="Put the raw query text on trace spans (off: only its length; turn on "
        "only where the trace store may retain what users type)",
    )

    @field_validator("metrics_host")
    @classmethod
    def _metrics_host_named(cls, host: str) -> str:
        if not host.strip() or any(char.isspace() for char in host):
            raise ValueError("not a host name or address (blank, or with spaces)")
        return host

    @model_validator(mode="after")
    def _ports_apart(self) -> GrpcServiceSettings:
        check_ports_apart(listening_ports(self, self.metrics_enabled))
        return self

    @model_validator(mode="after")
    def _tls_files_pair(self) -> GrpcServiceSettings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("RAG_TLS_CERT_FILE and RAG_TLS_KEY_FILE go together")
        if self.tls_require_client_cert and not self.tls_client_ca_file:
            raise ValueError("RAG_TLS_REQUIRE_CLIENT_CERT needs RAG_TLS_CLIENT_CA_FILE")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ValueError("RAG_TLS_CLIENT_CA_FILE needs RAG_TLS_CERT_FILE (TLS on)")
        self._check_pem_files()
        return self

    def _check_pem_files(self) -> None:
        """The PEM files parsed now: a garbage one failed the bind after the
        model loaded, as `cannot listen on host:port` (probe). A missing file
        is left to the server's own message, which names it."""
        cert, key, client_ca = self.tls_cert_file, self.tls_key_file, self.tls_client_ca_file
        readable = bool(cert and key and cert.is_file() and key.is_file())
        if readable and cert and key and (problem := pair_problem(cert, key)):
            raise ValueError(f"RAG_TLS_CERT_FILE / RAG_TLS_KEY_FILE: {problem}")
        if client_ca and client_ca.is_file() and (problem := ca_problem(client_ca)):
            raise ValueError(f"RAG_TLS_CLIENT_CA_FILE: {problem}")

    @model_validator(mode="after")
    def _exposure(self) -> GrpcServiceSettings:
        # Checked when settings load, before any model or store is opened.
        auth = bool(self.auth_callers_file or self.auth_callers)
        tls = bool(self.tls_cert_file)
        try:
            check_exposure(self.host, tls=tls, auth=auth, allow_insecure=self.allow_insecure)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


S = TypeVar("S", bound=BaseSettings)


def listening_ports(settings: BaseSettings, metrics_served: bool) -> dict[str, int]:
    """The ports `settings` listens on, by variable: the service's port and,
    while metrics are served, its metrics port (0, any free port, left out)."""
    ports = {}
    for name in type(settings).model_fields:
        port = getattr(settings, name)
        if not name.endswith("_port") or not isinstance(port, int) or port == 0:
            continue
        if name.endswith("metrics_port") and not metrics_served:
            continue
        ports[ENV_PREFIX + name.upper()] = port
    return ports


def check_ports_apart(ports: dict[str, int]) -> None:
    """ConfigError when two listeners of one process are given one port: the
    second bind failed after the model loaded, naming neither (probe)."""
    taken: dict[int, str] = {}
    for variable, port in ports.items():
        if port in taken:
            raise ConfigError(
                f"{taken[port]} and {variable} are both {port}: one process cannot listen "
                "twice on a port; give each its own (0: any free port)"
            )
        taken[port] = variable


def load_settings(cls: type[S], **overrides: Any) -> S:
    """Instantiate `cls` from the environment; raise ConfigError naming the bad value."""
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(cls, exc)) from None


def load_all(*classes: type[BaseSettings]) -> list[Any]:
    """Each of `classes` loaded, in order; else one ConfigError with the
    errors of every class that fails (a process that reads several: the
    first class's errors hid the others', one fix and one restart each)."""
    loaded: list[Any] = []
    problems: dict[str, None] = {}  # in order, once: classes share fields (the embedding's)
    for cls in classes:
        try:
            loaded.append(load_settings(cls))
        except ConfigError as exc:
            for problem in str(exc).removeprefix("invalid settings: ").split("; "):
                problems[problem] = None
    if problems:
        raise ConfigError("invalid settings: " + "; ".join(problems))
    return loaded


def _describe(cls: type[BaseSettings], exc: ValidationError) -> str:
    prefix = str(cls.model_config.get("env_prefix", ""))
    problems = []
    for err in exc.errors():
        if not err["loc"]:  # a rule across fields: its message names them
            problems.append(str(err["msg"]).removeprefix("Value error, "))
            continue
        field = ".".join(str(part) for part in err["loc"])
        env_name = _env_name(cls, field, prefix)
        message = f"{err['msg']}{_range_of(cls, field, err)}"
        problems.append(f"{env_name}={_shown(cls, field, err.get('input'))}: {message}")
    return "invalid settings: " + "; ".join(problems)


_BOUND_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _range_of(cls: type[BaseSettings], field: str, err: Any) -> str:
    """The whole range for a bound error: pydantic names only the bound that
    was crossed (`-1`: "greater than or equal to 0", for a port of 0..65535),
    and a NaN crossed neither ("less than or equal to 120"), probe."""
    if err.get("type") not in _BOUND_ERRORS:
        return ""
    info = next((i for n, i in cls.model_fields.items() if field in (n, i.validation_alias)), None)
    if info is None:
        return ""
    low = next((getattr(m, a) for m in info.metadata for a in ("ge", "gt") if hasattr(m, a)), None)
    high = next((getattr(m, a) for m in info.metadata for a in ("le", "lt") if hasattr(m, a)), None)
    if low is None or high is None:
        return ""
    return f" (a number from {low:g} to {high:g})"


# A URL's password (redis://:pw@host, postgresql://user:pw@host/db).
_URL_PASSWORD = re.compile(r"(://[^/@\s:]*:)[^@/\s]*@")


def _shown(cls: type[BaseSettings], field: str, value: Any) -> str:
    """The refused value as the message may repeat it: never a secret's
    (a key, a token), and a URL without its password; the message goes to
    logs and terminals."""
    info = next((i for n, i in cls.model_fields.items() if field in (n, i.validation_alias)), None)
    if info is not None and "SecretStr" in str(info.annotation):
        return "'**********'"
    shown = _URL_PASSWORD.sub(r"\1***@", repr(value))
    # A 100,000-character value made a 100 KB error line (probe).
    return shown if len(shown) <= 200 else f"{shown[:160]}... ({len(str(value))} characters)"


def _env_name(cls: type[BaseSettings], field: str, prefix: str) -> str:
    # pydantic reports an aliased field under its alias, a plain one under its name.
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str) and field in (name, alias):
            return alias.upper()
    return f"{prefix}{field}".upper()
