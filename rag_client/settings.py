"""How to reach a service, as one typed value checked when it is made.

    ClientSettings(
        target="retriever.internal:50052",
        tls=TlsSettings(ca_file=Path("ca.pem")),          # None: plaintext
        token_file=Path("reader.token"),                  # or token="..."
        timeout=5.0,                                      # default deadline per call, seconds
        retry=RetryPolicy(max_attempts=4),
    )

A wrong value raises `InvalidSettings` at construction, naming the field
("tls.ca_file: /x/ca.pem is not a readable file"). `ClientSettings.from_env`
reads the same RAG_<SERVICE>_* variables the services' own clients read."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_client.deadline import MAX_DEADLINE_S, finite
from rag_client.env import named, settings_fields
from rag_client.errors import InvalidSettings
from rag_client.pem import ca_problem, pair_problem

MAX_ATTEMPTS = 10  # the most attempts a RetryPolicy may allow


def _number(name: str, value: object, *, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSettings(name, f"expected a number, got {value!r}")
    if not finite(value) or not low <= value <= high:
        limit = f"at least {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise InvalidSettings(name, f"{value!r} is not {limit}")
    return float(value)


def _readable_file(name: str, path: object) -> None:
    if not isinstance(path, Path):
        raise InvalidSettings(name, f"expected a pathlib.Path, got {path!r}")
    if not path.is_file() or not os.access(path, os.R_OK):
        raise InvalidSettings(name, f"{path} is not a readable file")


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of UNAVAILABLE only, for calls that are safe to repeat.

    Retry n (1-based) waits a backoff drawn uniformly from
    [(1 - jitter)·b, b] with b = min(max_backoff, initial_backoff·multiplier^(n-1)),
    and never starts when the call's remaining deadline cannot cover that wait.
    `max_attempts=1` turns retrying off."""

    max_attempts: int = 4
    initial_backoff: float = 0.2  # seconds
    max_backoff: float = 3.0  # seconds
    multiplier: float = 2.0
    jitter: float = 0.2  # fraction of each backoff drawn at random, in [0, 1]

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise InvalidSettings("retry.max_attempts", f"expected an int, got {attempts!r}")
        if not 1 <= attempts <= MAX_ATTEMPTS:
            raise InvalidSettings("retry.max_attempts", f"{attempts} is outside 1..{MAX_ATTEMPTS}")
        _number("retry.initial_backoff", self.initial_backoff, low=0.001, high=60)
        _number("retry.max_backoff", self.max_backoff, low=self.initial_backoff, high=300)
        _number("retry.multiplier", self.multiplier, low=1, high=10)
        _number("retry.jitter", self.jitter, low=0, high=1)

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (1 = the first retry)."""
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1))
        return base * (1.0 - self.jitter * rand())


@dataclass(frozen=True)
class TlsSettings:
    """TLS to the server. `ca_file` None: the system trust store.
    `cert_file` + `key_file`: a client certificate (mutual TLS).
    `server_name`: the name checked in the server's certificate instead of
    the target's host (e.g. when dialling an IP address)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file"):
            value = getattr(self, name)
            if value is not None:
                _readable_file(f"tls.{name}", value)
        if (self.cert_file is None) != (self.key_file is None):
            raise InvalidSettings(
                "tls.cert_file", "a client certificate and tls.key_file go together"
            )
        if self.ca_file is not None and (problem := ca_problem(self.ca_file)):
            raise InvalidSettings("tls.ca_file", f"{self.ca_file}: {problem}")
        pair = (self.cert_file, self.key_file)
        if pair[0] and pair[1] and (problem := pair_problem(pair[0], pair[1])):
            raise InvalidSettings("tls.cert_file", f"{self.cert_file}: {problem}")
        if not isinstance(self.server_name, str) or any(c.isspace() for c in self.server_name):
            raise InvalidSettings("tls.server_name", f"{self.server_name!r} is not a host name")

    def read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(root certificates, private key, certificate chain) as PEM bytes."""
        paths = (self.ca_file, self.key_file, self.cert_file)
        return tuple(p.read_bytes() if p else None for p in paths)  # type: ignore[return-value]


# URL schemes that are not gRPC name schemes (dns:, ipv4:, ipv6:, unix:, ...).
_WEB_SCHEMES = ("http", "https", "grpc", "grpcs", "tcp")


def _check_target(target: object) -> None:
    if not isinstance(target, str) or not target:
        raise InvalidSettings("target", f"expected 'host:port', got {target!r}")
    if any(c.isspace() for c in target):
        raise InvalidSettings("target", f"{target!r} contains whitespace")
    if ":/" in target or target.startswith("unix:"):
        scheme = target.split(":", 1)[0].lower()
        if scheme in _WEB_SCHEMES:
            # gRPC reads `http://host:1` as a DNS name and fails on every call
            # ("Misformatted domain name"), long after this check (probe).
            host = target.split("://", 1)[-1].split("/", 1)[0]
            raise InvalidSettings(
                "target",
                f"{target[:200]!r}: a gRPC address is 'host:port' ({host[:200]!r}), without "
                f"{scheme}://; TLS is set by its own settings",
            )
        return  # a gRPC name with a scheme (dns:///..., unix:...): gRPC parses it
    host, _, port = target.rpartition(":")
    # isascii: '²' and full-width digits are digits to isdigit() (a raw ValueError, probe).
    if not host or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise InvalidSettings("target", f"{target!r} is not 'host:port' with a port in 1..65535")


def check_token(token: object, field: str = "token") -> None:
    """InvalidSettings naming `field` for a token no server could read (the
    message never quotes it)."""
    if not isinstance(token, str):
        raise InvalidSettings(field, "expected a str")
    if token.lower().startswith("bearer "):
        raise InvalidSettings(field, "give the token alone; 'Bearer ' is added by the client")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise InvalidSettings(field, "must be printable ASCII without spaces")


def _check_options(options: object) -> None:
    if not isinstance(options, tuple | list) or not all(
        isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) for o in options
    ):
        raise InvalidSettings("channel_options", f"expected (name, value) pairs, got {options!r}")


@dataclass(frozen=True)
class ClientSettings:
    """Everything a client needs; see the module docstring."""

    target: str
    tls: TlsSettings | None = None
    token: str = field(default="", repr=False)
    token_file: Path | None = None  # re-read when it changes (rotation without restart)
    timeout: float = 10.0  # the default deadline of a call, in seconds
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    channel_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        _check_target(self.target)
        if self.tls is not None and not isinstance(self.tls, TlsSettings):
            raise InvalidSettings("tls", f"expected TlsSettings or None, got {self.tls!r}")
        check_token(self.token)
        if self.token_file is not None:
            if self.token:
                raise InvalidSettings("token_file", "give token or token_file, not both")
            _readable_file("token_file", self.token_file)
        _number("timeout", self.timeout, low=0.001, high=MAX_DEADLINE_S)
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidSettings("retry", f"expected a RetryPolicy, got {self.retry!r}")
        _check_options(self.channel_options)

    @classmethod
    def from_env(
        cls, service: str, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> ClientSettings:
        """Settings from RAG_<SERVICE>_ADDR, _TLS, _TLS_CA_FILE, _TLS_CERT_FILE,
        _TLS_KEY_FILE, _TLS_SERVER_NAME, _TOKEN and _TOKEN_FILE (service:
        "retriever", "indexer" or "reranker"); keyword arguments override them."""
        fields = settings_fields(service, os.environ if environ is None else environ, TlsSettings)
        try:
            return cls(**(fields | overrides))
        except InvalidSettings as exc:
            if exc.field in overrides or exc.field.split(".")[0] in overrides:
                raise
            raise named(exc, f"RAG_{service.upper()}_") from None
