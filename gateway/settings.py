"""Gateway settings: every gate is configured here and fails closed by default.

Gateway variables are `RAG_GATEWAY_*` (e.g. `RAG_GATEWAY_PUBLIC_ENABLED`); the
Retriever's address is `RAG_RETRIEVER_ADDR`, the name every client of it reads;
the shared ones (`RAG_HOST`, `RAG_LOG_LEVEL`, ...) come from the base class.
Lists are comma-separated
(`RAG_GATEWAY_ALLOWED_ORIGINS=https://a.example,https://b.example`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Literal

from limits import parse_many
from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import NoDecode

from services.core.errors import ConfigError
from services.runtime.security.client_settings import client_address, client_settings
from services.runtime.settings import BaseServiceSettings, check_ports_apart, listening_ports

KiB = 1024
CommaList = Annotated[list[str], NoDecode]
# scheme://host[:port] and nothing else: what a browser sends as Origin.
_ORIGIN = re.compile(r"^https?://(?:\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?$")
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}
REDIS_SCHEMES = ("redis", "rediss", "unix")  # what redis-py's from_url reads
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        value = value.split(",")
    if isinstance(value, list):
        return [str(item).strip() for item in value if str(item).strip()]
    return value


def _each_item(value: object, parse: Callable[[str], str]) -> object:
    """A comma list with `parse` applied to every item; anything else is left
    for pydantic to reject."""
    value = _comma_list(value)
    if not isinstance(value, list):
        return value
    return [parse(item) for item in value]


def _origin(item: str) -> str:
    return item.rstrip("/").lower()


def _public_origin(item: str) -> str:
    origin = _origin(item)
    if not _ORIGIN.match(origin):
        raise ValueError(f"{item!r} is not an origin like https://search.example.com")
    scheme = origin.split(":", 1)[0]
    # Browsers leave the scheme's default port out of Origin.
    return origin.removesuffix(_DEFAULT_PORTS[scheme])


def _allowed_origin(item: str) -> str:
    if item.strip() == "*":
        raise ValueError("'*' is not supported: list each origin that may call the API")
    return _public_origin(item)


def _proxy_network(item: str) -> str:
    try:
        return str(ipaddress.ip_network(item, strict=False))
    except ValueError:
        raise ValueError(
            f"{item!r} is not an address or CIDR network (list the proxies; "
            "'*' is not accepted: it would let every caller choose its address)"
        ) from None


class GatewaySettings(
    BaseServiceSettings,
    client_settings("retriever", "Retriever"),  # type: ignore[misc]
):
    gateway_port: int = Field(8080, ge=0, le=65535, description="HTTP port (0: pick a free one)")
    retriever_addr: str = Field("localhost:50052", description="host:port of the Retriever")
    gateway_public_enabled: bool = Field(
        False, description="Serve searches at all; off answers 503 without any downstream call"
    )
    gateway_require_release: bool = Field(
        False,
        description=(
            "Serve searches only while the Retriever reports a passing release check "
            "(`rag-indexer release-check`) for the index generation it serves; 503 otherwise"
        ),
    )
    gateway_disabled_message: str = Field(
        "Search is not open to the public yet. Please try again later.",
        description="The controlled message sent while the public switch is off",
    )
    gateway_allowed_origins: CommaList = Field(
        default_factory=list, description="Origins (scheme://host[:port]) that may call the API"
    )
    gateway_public_origins: CommaList = Field(
        default_factory=list,
        description=(
            "The gateway's own public origins (where its page is served, e.g. "
            "https://search.example.com); empty: http://localhost, http://127.0.0.1 and "
            "http://[::1] at the port the request arrived on (the local page only). "
            "Never derived from the Host header"
        ),
    )
    gateway_allow_same_origin: bool = Field(
        True,
        description="The gateway's own page (RAG_GATEWAY_PUBLIC_ORIGINS) may call the API "
        "without being listed",
    )
    gateway_allow_missing_origin: bool = Field(
        False, description="Accept API calls that carry no Origin header (curl, servers)"
    )
    gateway_rate_limit: str = Field(
        "5/second;60/minute",
        description="Per-client limits (a burst and a sustained rate), `limits` notation",
    )
    gateway_daily_budget: int = Field(
        10_000,
        ge=1,
        le=1_000_000_000,
        description="Searches forwarded per UTC day across all instances",
    )
    gateway_daily_budget_client_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="The most of the daily budget one client (address, IPv6 /64) may spend, "
        "so that one client cannot use it up for everyone (1: no share)",
    )
    gateway_breaker_fail_max: int = Field(
        5,
        ge=1,
        le=10_000,  # 2**64 disabled the breaker without a word (probe)
        description="Consecutive Retriever failures that open the breaker for everyone "
        "(UNAVAILABLE); also how many timeouts and unexpected errors (DEADLINE_EXCEEDED, "
        "INTERNAL, ...) one client may meet within RAG_GATEWAY_BREAKER_RESET_S before its own "
        "searches are paused (503 breaker_open), of which only its first counts for everyone: "
        "one client's costly questions cannot open it for all (gateway/breaker.py)",
    )
    gateway_breaker_reset_s: float = Field(
        15.0,
        gt=0,
        le=3600,
        description="How long the breaker stays open before a probe; the window of a "
        "client's unexpected errors (whole seconds)",
    )
    gateway_max_body_bytes: int = Field(
        16 * KiB, ge=256, le=1024 * KiB, description="Largest request body accepted (413 above)"
    )
    gateway_body_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Longest wait for a request body to arrive whole (408 after): a client "
        "that stops sending mid-body does not hold its request open. Raise it with "
        "RAG_GATEWAY_MAX_BODY_BYTES for slow links",
    )
    gateway_max_head_bytes: int = Field(
        16 * KiB,
        ge=4 * KiB,
        le=256 * KiB,
        description="Largest request head (request line and headers) accepted: 431 "
        "`headers_too_large` above, whether the head arrives in one read or in many "
        "(uvicorn's h11 buffer bound is set to the same figure)",
    )
    gateway_header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Longest wait for a request's head (request line and headers) to arrive "
        "whole, from the connection's start or the previous response: 408 and the connection "
        "closed after (a silent close if nothing came), so a client that sends a head slowly, "
        "or never finishes it, does not hold a connection (gateway/connections.py)",
    )
    gateway_send_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="Longest a client may stop reading an answer (the server's send buffer "
        "full, or a closed connection's last bytes unsent) before the connection is cut, so "
        "a client that never reads does not hold a connection (gateway/connections.py)",
    )
    gateway_max_connections: int = Field(
        1024,
        ge=1,
        le=65536,
        description="Open client connections the gateway keeps; one more is answered 503 and "
        "closed at once. The process's open-file limit is raised to fit it at start-up (an "
        "error if the hard limit is lower)",
    )
    gateway_max_connections_per_client: int = Field(
        64,
        ge=1,
        le=65536,
        description="Open connections one peer address may hold (503 above); trusted proxies "
        "(RAG_GATEWAY_FORWARDED_ALLOW_IPS) are exempt. At most RAG_GATEWAY_MAX_CONNECTIONS",
    )
    gateway_max_json_depth: int = Field(
        32,
        ge=3,  # a search request itself nests three deep (body, scope, a scope list)
        le=128,  # well inside the recursion limit of the JSON parser and the validator
        description="Deepest nesting of arrays and objects in a request body (400 above)",
    )
    gateway_max_query_chars: int = Field(
        512, ge=1, le=4096, description="Longest query, after collapsing whitespace (422 above)"
    )
    gateway_max_top_k: int = Field(20, ge=1, le=100, description="Most hits one search may ask for")
    gateway_default_top_k: int = Field(
        5, ge=1, le=100, description="Hits returned when the request names no top_k"
    )
    gateway_max_filter_values: int = Field(
        20, ge=0, le=200, description="Bound on scope list/map sizes"
    )
    gateway_request_deadline_s: float = Field(
        3.0, gt=0, le=60, description="Deadline of one search, passed on to Retrieve"
    )
    gateway_readiness_timeout_s: float = Field(
        1.0, gt=0, le=30, description="How long /readyz waits for the Retriever's health answer"
    )
    gateway_redis_url: str = Field(
        "", description="redis://host:port/db shared by instances; empty: counters in memory"
    )
    gateway_redis_namespace: str = Field(
        "rag-gateway",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Prefix of every Redis key, so deployments can share one Redis",
    )
    gateway_query_log_retention: Literal["none", "raw"] = Field(
        "none", description="`raw` allows query text in logs; `none` logs length and a keyed hash"
    )
    gateway_allow_debug: bool = Field(True, description="Clients may ask for the debug report")
    gateway_trust_traceparent: bool = Field(
        False,
        description=(
            "Continue the trace a request's traceparent header names, sampling decision "
            "included (for a gateway behind your own traced proxy). Off: every search starts "
            "a trace of its own, linked to the caller's, so the public cannot choose trace "
            "ids or force sampling"
        ),
    )
    gateway_debug_reasons: bool = Field(
        False,
        description=(
            "Debug answers also carry the Retriever's own words (degradation and rerank "
            "reasons, channel errors, the rerank model), which name internal addresses and "
            "models: only for a gateway whose every caller is trusted. Off: stable codes only"
        ),
    )
    gateway_forwarded_allow_ips: CommaList = Field(
        default_factory=list,
        description=(
            "Proxies (addresses or CIDR networks) whose X-Forwarded-For names the client; "
            "empty (default): none, not even loopback, and every client is its direct peer"
        ),
    )
    gateway_metrics_enabled: bool = Field(
        True, description="Serve Prometheus metrics on a listener of their own"
    )
    gateway_metrics_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Interface of the metrics listener (never the public port)",
    )
    gateway_metrics_port: int = Field(
        9464, ge=0, le=65535, description="Port of the metrics listener (0: pick a free one)"
    )

    @field_validator("gateway_allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        # Checked as origins: '*' or a URL with a path never equals a browser's
        # Origin header, so every cross-site call was refused without a word.
        return _each_item(value, _allowed_origin)

    @field_validator("gateway_public_origins", mode="before")
    @classmethod
    def _parse_public_origins(cls, value: object) -> object:
        return _each_item(value, _public_origin)

    @field_validator("gateway_forwarded_allow_ips", mode="before")
    @classmethod
    def _parse_proxies(cls, value: object) -> object:
        return _each_item(value, _proxy_network)

    @field_validator("gateway_rate_limit")
    @classmethod
    def _parse_rate_limit(cls, value: str) -> str:
        try:
            parsed = parse_many(value)
            if not parsed:
                raise ValueError("no limit given")
        except ValueError as exc:
            raise ValueError(f"not a limits expression like '5/second;60/minute' ({exc})") from exc
        if any(item.amount < 1 for item in parsed):
            raise ValueError(f"{value!r} allows no search at all (every one answered 429)")
        return value

    @field_validator("retriever_addr")
    @classmethod
    def _retriever_addr(cls, addr: str) -> str:
        """An address the Retriever's client accepts: checked here, not when
        the first search (or the start-up, as a traceback) meets it."""
        return client_address(addr, "RAG_RETRIEVER_ADDR")

    @field_validator("gateway_redis_url")
    @classmethod
    def _redis_url(cls, url: str) -> str:
        if url and url.split("://", 1)[0].lower() not in REDIS_SCHEMES:
            schemes = ", ".join(f"{s}://" for s in REDIS_SCHEMES)
            # Only the scheme is repeated: the URL may hold a password.
            raise ValueError(f"not a Redis URL: expected one of {schemes}")
        return url

    @field_validator("gateway_default_top_k")
    @classmethod
    def _default_top_k_within_max(cls, value: int, info: ValidationInfo) -> int:
        return _at_most(value, info, "gateway_max_top_k")

    @field_validator("gateway_max_connections_per_client")
    @classmethod
    def _per_client_within_max(cls, value: int, info: ValidationInfo) -> int:
        return _at_most(value, info, "gateway_max_connections")

    @model_validator(mode="after")
    def _ports_apart(self) -> GatewaySettings:
        check_ports_apart(listening_ports(self, self.gateway_metrics_enabled))
        return self

    @model_validator(mode="after")
    def _someone_can_search(self) -> GatewaySettings:
        """Public, yet no origin allowed, same-origin pages refused and callers
        without an Origin refused: every search would be 403 (probe)."""
        closed = not (
            self.gateway_allowed_origins
            or self.gateway_allow_same_origin
            or self.gateway_allow_missing_origin
        )
        if self.gateway_public_enabled and closed:
            raise ConfigError(
                "RAG_GATEWAY_PUBLIC_ENABLED=true, but no caller could search: set "
                "RAG_GATEWAY_ALLOWED_ORIGINS, or RAG_GATEWAY_ALLOW_SAME_ORIGIN=true (the "
                "gateway's own page), or RAG_GATEWAY_ALLOW_MISSING_ORIGIN=true (server-side "
                "callers)"
            )
        return self

    @property
    def uses_redis(self) -> bool:
        return bool(self.gateway_redis_url)

    @property
    def trusted_proxies(self) -> tuple[IpNetwork, ...]:
        return tuple(ipaddress.ip_network(item) for item in self.gateway_forwarded_allow_ips)


def _at_most(value: int, info: ValidationInfo, bound: str) -> int:
    """`value`, unless it exceeds the field `bound` (declared before it, so
    already validated when this runs)."""
    most = info.data.get(bound)
    if most is not None and value > most:
        raise ValueError(f"exceeds RAG_{bound.upper()}={most}")
    return value
