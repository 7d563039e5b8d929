"""The gateway's own ASGI middlewares, outermost last in `create_app`: the
API's JSON 500 for an unhandled error, the head-size bound, request ids and
`nosniff` on every response."""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError, ErrorCode, error_response
from services.core.logging import get_logger

log = get_logger(__name__)

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


class _HttpMiddleware:
    """ASGI middleware that acts on HTTP requests only (lifespan passes through)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class InternalErrorMiddleware(_HttpMiddleware):
    """Turns an unhandled exception into the API's JSON 500 (`internal`)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unhandled_error", path=scope.get("path", ""))
            if started:  # too late for an error body: let the server drop the connection
                raise
            request_id = scope.get("state", {}).get("request_id", "")
            error = ApiError(ErrorCode.INTERNAL, "internal error")
            await error_response(error, request_id)(scope, receive, send)


def head_bytes(scope: Scope) -> int:
    """The size of a request's head as it came (request line and header
    lines, their separators counted)."""
    query = scope.get("query_string") or b""
    target = len(scope.get("raw_path") or b"") + (len(query) + 1 if query else 0)
    line = len(scope["method"]) + 1 + target + 11  # " HTTP/1.1\r\n"
    return line + sum(len(name) + len(value) + 4 for name, value in scope.get("headers", []))


class HeadSizeMiddleware(_HttpMiddleware):
    """431 `headers_too_large` for a head over `max_bytes`. uvicorn's h11
    bounds only a head still arriving (the same figure): one that came whole
    in a single read, ~100 KB and more, was served."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        size = head_bytes(scope)
        if size <= self.max_bytes:
            await self.app(scope, receive, send)
            return
        message = (
            f"request head of {size} bytes exceeds the limit of {self.max_bytes} "
            "(request line and headers: RAG_GATEWAY_MAX_HEAD_BYTES)"
        )
        request_id = scope.get("state", {}).get("request_id", "")
        error = ApiError(ErrorCode.HEADERS_TOO_LARGE, message)
        await error_response(error, request_id)(scope, receive, send)


class RequestIdMiddleware(_HttpMiddleware):
    """Gives every request an id (the caller's X-Request-Id when well-formed),
    visible to handlers as `request.state.request_id` and echoed back."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class NoSniffMiddleware(_HttpMiddleware):
    """`X-Content-Type-Options: nosniff` on every response (JSON, errors,
    preflights, files), so no browser reads an API answer as another type."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_nosniff)
