"""Origin allowlist and CORS for the API routes, enforced on the server.

Browsers enforce CORS only on *reading* a response: a cross-origin POST still
reaches a server that merely omits the CORS headers, and would still cost a
downstream search. So a request whose Origin is not allowed is answered here
with 403 before it reaches any handler, preflight or not.

"Same origin" means the gateway's configured public origins
(RAG_GATEWAY_PUBLIC_ORIGINS), never the Host header: Host is the caller's to
choose, and with DNS rebinding a page on http://evil.example sends
`Origin: http://evil.example` *and* `Host: evil.example` to the gateway.
Without configured public origins, the gateway's own origins are the loopback
names at the port of the socket the request arrived on (the local page of
`make run`, http://127.0.0.1:8080 or http://localhost:8080): a page can only
have one of those origins if it was served from that very port on the
visitor's own machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError, ErrorCode, error_response
from services.core.logging import get_logger

log = get_logger(__name__)

PREFLIGHT_MAX_AGE_S = 600
ALLOWED_METHODS = "GET, POST, OPTIONS"
ALLOWED_REQUEST_HEADERS = ("content-type", "x-request-id")
EXPOSED_HEADERS = "Retry-After, X-Request-Id"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
# Outside the API prefix, answered with CORS headers to allowed origins only.
READABLE_PATHS = frozenset({"/readyz"})


class OriginPolicy:
    """Which origins may call the API. Origins compare as lower-case
    `scheme://host[:port]` strings, exactly as browsers send them."""

    def __init__(
        self,
        allowed_origins: Iterable[str],
        public_origins: Iterable[str] = (),
        allow_same_origin: bool = True,
        allow_missing_origin: bool = False,
    ) -> None:
        self.allowed = {origin.lower().rstrip("/") for origin in allowed_origins}
        self.public = frozenset(origin.lower().rstrip("/") for origin in public_origins)
        self.allow_same_origin = allow_same_origin
        self.allow_missing_origin = allow_missing_origin

    def own_origins(self, local_port: int | None) -> frozenset[str]:
        """The gateway's own origins: the configured public ones, or else the
        loopback names at `local_port` (the gateway's socket, not the caller's say)."""
        if self.public or local_port is None:
            return self.public
        port = "" if local_port == 80 else f":{local_port}"  # browsers omit the default
        return frozenset(f"http://{host}{port}" for host in LOOPBACK_HOSTS)

    def allows(self, origin: str | None, local_port: int | None) -> bool:
        if not origin:
            return self.allow_missing_origin
        origin = origin.lower()
        if origin in self.allowed:
            return True
        return self.allow_same_origin and origin in self.own_origins(local_port)

    @staticmethod
    def cors_headers(origin: str) -> dict[str, str]:
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": EXPOSED_HEADERS,
            "Vary": "Origin",
        }

    @classmethod
    def preflight_headers(cls, origin: str) -> dict[str, str]:
        return {
            **cls.cors_headers(origin),
            "Access-Control-Allow-Methods": ALLOWED_METHODS,
            "Access-Control-Allow-Headers": ", ".join(ALLOWED_REQUEST_HEADERS),
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
        }


def local_port(scope: Scope) -> int | None:
    """The port of the gateway's own socket the request arrived on."""
    server = scope.get("server")
    port = server[1] if server else None
    return port if isinstance(port, int) else None


class OriginMiddleware:
    """Applies `OriginPolicy` to paths under `prefix`; answers preflights itself.

    `on_reject(seconds)` lets the app count rejections in its metrics.
    """

    def __init__(
        self,
        app: ASGIApp,
        policy: OriginPolicy,
        prefix: str = "/v1/",
        on_reject: Callable[[float], None] | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.prefix = prefix
        self.on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in READABLE_PATHS:
            await self.app(scope, receive, self._readable(scope, send))
            return
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        # A browser sends at most one Origin (RFC 6454 §7.3); with two, which
        # one a proxy or the app would read differs, so neither is trusted.
        if len(headers.getlist("origin")) > 1 or not self.policy.allows(origin, local_port(scope)):
            await self._reject(scope, receive, send, started)
            return
        if origin and _is_preflight(scope, headers):
            await _empty_response(send, 204, self.policy.preflight_headers(origin))
            return
        if origin:
            send = _with_headers(send, self.policy.cors_headers(origin))
        await self.app(scope, receive, send)

    def _readable(self, scope: Scope, send: Send) -> Send:
        """A page on an allowed origin may read these (the widget's release-gate
        notice reads /readyz); nothing is refused here: load balancers and
        probes send no Origin."""
        origins = Headers(scope=scope).getlist("origin")
        if len(origins) == 1 and self.policy.allows(origins[0], local_port(scope)):
            return _with_headers(send, self.policy.cors_headers(origins[0]))
        return send

    async def _reject(self, scope: Scope, receive: Receive, send: Send, started: float) -> None:
        error = ApiError(ErrorCode.ORIGIN_NOT_ALLOWED, "this origin may not call the API")
        request_id = scope.get("state", {}).get("request_id", "")
        await error_response(error, request_id)(scope, receive, send)
        origin = Headers(scope=scope).get("origin", "")
        log.info("search", outcome="origin_rejected", origin=origin[:200], request_id=request_id)
        if self.on_reject is not None:
            self.on_reject(time.perf_counter() - started)


def _is_preflight(scope: Scope, headers: Headers) -> bool:
    return scope["method"] == "OPTIONS" and "access-control-request-method" in headers


async def _empty_response(send: Send, status: int, headers: dict[str, str]) -> None:
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": b""})


def _with_headers(send: Send, extra: dict[str, str]) -> Send:
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *raw]}
        await send(message)

    return send_with_headers
