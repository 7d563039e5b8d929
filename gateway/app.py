"""The gateway's HTTP app: `create_app(settings)` builds it.

Routes: POST /v1/search (every public gate), GET /healthz (the process is
up), GET /readyz (the Retriever — and Redis when configured — answer, and
the release gate is open when RAG_GATEWAY_REQUIRE_RELEASE is set; 503 with
`"status": "gated"` when only the gate is closed: up, public search withheld),
GET /openapi.json, and the web page: `/`, `/widget.js` and `/static/*`, all
served from `gateway/static` (no CDN). Prometheus metrics are not on this
port: the app starts a listener of their own (`gateway.metrics`).
Every response says `X-Content-Type-Options: nosniff`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from limits.aio.storage import Storage
from redis.asyncio import ConnectionPool
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles

from gateway.breaker import ClientStrikes, RetrieverBreaker, build_breaker_storage
from gateway.errors import ApiError, ErrorBody, ErrorCode, error_response
from gateway.metrics import GatewayMetrics, MetricsListener
from gateway.middleware import (
    HeadSizeMiddleware,
    InternalErrorMiddleware,
    NoSniffMiddleware,
    RequestIdMiddleware,
)
from gateway.origin import OriginMiddleware, OriginPolicy
from gateway.querylog import QueryLogPolicy
from gateway.quotas import ClientRateLimiter, DailyBudget, build_storage
from gateway.readiness import Readiness
from gateway.release_gate import ReleaseGate
from gateway.retriever_client import RetrieverClient, RetrieverClientFactory
from gateway.schema import SearchLimits, SearchRequest, SearchResponse
from gateway.search import Gates, SearchGateway
from gateway.settings import GatewaySettings
from gateway.tracing import GatewayTracing
from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.runtime.observability.telemetry import ServiceInfo
from services.runtime.observability.tracing import Tracing
from services.runtime.security.client import ClientSecurity

log = get_logger(__name__)


def package_version() -> str:
    """The installed distribution's version (pyproject.toml), reported by the API."""
    try:
        return version("rag-services")
    except PackageNotFoundError:  # run from a tree that was never installed
        return "0+unknown"


STATIC_DIR = Path(__file__).parent / "static"
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _PageFiles(StaticFiles):
    """The page's files with the page's headers: `/static/index.html` is the
    page as well, and must not be framed by another site either."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(PAGE_HEADERS)
        return response


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "invalid_json, json_too_deep, upstream_rejected or invalid_page_token",
        403: "origin_not_allowed or scope_not_allowed",
        408: "body_timeout",
        413: "body_too_large",
        415: "unsupported_media_type",
        431: "headers_too_large",
        422: "invalid_request, query_too_long or top_k_out_of_range",
        429: "rate_limited or budget_exhausted (see Retry-After)",
        409: "page_expired (a commit changed the ranking since the page token was issued)",
        502: "upstream_unavailable",
        503: "public_disabled, release_not_current, breaker_open or limiter_unavailable",
        504: "upstream_timeout",
    }.items()
}


@dataclass
class Runtime:
    """What the app builds at start-up and closes at shutdown."""

    storage: Storage
    retriever: RetrieverClient
    search: SearchGateway
    release: ReleaseGate
    readiness: Readiness
    redis_pool: ConnectionPool | None  # the limits storage's connections
    breaker_redis: redis.Redis | None  # pybreaker's (synchronous) client


def create_app(
    settings: GatewaySettings,
    retriever_client_factory: RetrieverClientFactory | None = None,
    tracing: Tracing | None = None,
) -> FastAPI:
    """`tracing` None: from the OTEL_* variables (off unless they ask)."""
    metrics = GatewayMetrics()
    tracing = tracing or Tracing.from_env("rag-gateway")
    # As every service's listener says which app answers (docs/operations.md).
    metrics.registry.register(ServiceInfo("gateway", tracing.enabled))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as running:  # stops in reverse: metrics, then runtime
            running.push_async_callback(asyncio.to_thread, tracing.shutdown)  # bounded
            runtime = _start_runtime(settings, metrics, retriever_client_factory, tracing)
            running.push_async_callback(_stop_runtime, runtime)
            app.state.runtime = runtime
            app.state.metrics_url = None
            if settings.gateway_metrics_enabled:
                listener = MetricsListener.start(
                    metrics.registry,
                    settings.gateway_metrics_host,
                    settings.gateway_metrics_port,
                    "set RAG_GATEWAY_METRICS_PORT or RAG_GATEWAY_METRICS_HOST, or "
                    "RAG_GATEWAY_METRICS_ENABLED=false",
                )
                running.push_async_callback(listener.close)
                app.state.metrics_url = listener.url
            app.state.tracing_enabled = tracing.enabled
            yield

    app = FastAPI(
        title="RAG gateway",
        version=package_version(),
        summary="Public HTTP/JSON front door to hybrid retrieval",
        lifespan=lifespan,
        docs_url=None,  # the Swagger UI would load from a CDN
        redoc_url=None,
    )
    app.state.metrics = metrics
    app.state.settings = settings
    # No redirect from `/v1/search/` to `/v1/search`: Starlette would build
    # the Location from the caller's Host header (any host it names).
    app.router.redirect_slashes = False
    _add_routes(app, settings)
    _add_error_handlers(app)
    policy = OriginPolicy(
        settings.gateway_allowed_origins,
        public_origins=settings.gateway_public_origins,
        allow_same_origin=settings.gateway_allow_same_origin,
        allow_missing_origin=settings.gateway_allow_missing_origin,
    )
    # Innermost first: an unexpected error becomes a JSON 500 *inside* the
    # origin and request-id middlewares, so the browser can read it (CORS
    # headers) and support can trace it (X-Request-Id). Starlette's own
    # catch-all handler runs outside every user middleware and would drop both.
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(HeadSizeMiddleware, max_bytes=settings.gateway_max_head_bytes)
    app.add_middleware(
        OriginMiddleware, policy=policy, on_reject=lambda s: metrics.observe("origin_rejected", s)
    )
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(NoSniffMiddleware)
    return app


def _start_runtime(
    settings: GatewaySettings,
    metrics: GatewayMetrics,
    client_factory: RetrieverClientFactory | None,
    tracing: Tracing,
) -> Runtime:
    namespace = settings.gateway_redis_namespace
    try:
        storage, pool = build_storage(settings.gateway_redis_url, namespace)
        breaker_storage, breaker_client = build_breaker_storage(
            settings.gateway_redis_url, namespace
        )
    except (redis.RedisError, ValueError) as exc:
        # The breaker's storage writes its state at once: a Redis that is down
        # or not one ended the start in a traceback.
        # (The URL may hold a password: not repeated here.)
        raise ConfigError(f"RAG_GATEWAY_REDIS_URL: {type(exc).__name__}: {exc}") from None
    retriever = RetrieverClient(
        settings.retriever_addr,
        settings.max_message_bytes,
        client_factory=client_factory,
        security=ClientSecurity.from_settings(settings, "retriever"),
    )
    retriever.open()
    release = ReleaseGate(
        retriever, settings.gateway_require_release, settings.gateway_readiness_timeout_s
    )
    gates = Gates(
        rate_limiter=ClientRateLimiter(storage, settings.gateway_rate_limit),
        budget=DailyBudget(
            storage, settings.gateway_daily_budget, settings.gateway_daily_budget_client_share
        ),
        breaker=RetrieverBreaker(
            settings.gateway_breaker_fail_max,
            settings.gateway_breaker_reset_s,
            breaker_storage,
            on_state=metrics.set_breaker_state,
            clients=ClientStrikes(
                storage, settings.gateway_breaker_fail_max, settings.gateway_breaker_reset_s
            ),
        ),
        limits=SearchLimits(
            settings.gateway_max_query_chars,
            settings.gateway_max_top_k,
            settings.gateway_max_filter_values,
        ),
        release=release,
    )
    search = SearchGateway(
        settings,
        gates,
        retriever,
        metrics,
        QueryLogPolicy(settings.gateway_query_log_retention),
        GatewayTracing(tracing, settings.gateway_trust_traceparent),
    )
    readiness = Readiness(
        retriever,
        storage if settings.uses_redis else None,
        settings.gateway_readiness_timeout_s,
        on_serving=gates.breaker.retriever_seen_serving,
    )
    return Runtime(
        storage,
        retriever,
        search,
        release,
        readiness,
        redis_pool=pool,
        breaker_redis=breaker_client,
    )


async def _stop_runtime(runtime: Runtime) -> None:
    await runtime.retriever.close()
    if runtime.redis_pool is not None:
        await runtime.redis_pool.aclose()
    if runtime.breaker_redis is not None:
        runtime.breaker_redis.close()
    log.info("gateway_stopped")


def _add_routes(app: FastAPI, settings: GatewaySettings) -> None:
    @app.post(
        "/v1/search",
        response_model=SearchResponse,
        responses=ERROR_RESPONSES,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": SearchRequest.model_json_schema()}},
            }
        },
        summary="Hybrid search with evidence and citations",
    )
    async def search(request: Request) -> Response:
        runtime: Runtime = request.app.state.runtime
        return await runtime.search.handle(request)

    # HEAD as well as GET on the probes: a monitor that checks a status
    # without a body (curl -I, many uptime checkers) must not see 405. The
    # route that serves is the GET+HEAD one, registered first (the lower
    # decorator) so a 405's `Allow` names both; the GET above it only gives
    # the schema one operation per probe (FastAPI would list HEAD twice).
    @app.get("/healthz", summary="Liveness: the process answers")
    @app.api_route("/healthz", methods=["GET", "HEAD"], include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        summary="Readiness: the Retriever (and Redis, if used) answer; the release gate is open",
    )
    @app.api_route("/readyz", methods=["GET", "HEAD"], include_in_schema=False)
    async def readyz(request: Request) -> JSONResponse:
        runtime: Runtime = request.app.state.runtime
        ready, reason = await runtime.readiness.state()
        release = await runtime.release.state()
        status = "ready" if ready else "not_ready"
        if ready and not release.open:
            # Up but gated: a launcher waiting for the gateway must tell this
            # from "not up" (scripts/run_local.py); a balancer still sends
            # no traffic (503).
            ready, reason, status = False, release.reason, "gated"
        body: dict[str, object] = {"status": status}
        if not ready:
            body["reason"] = reason
        body["release"] = release.as_json()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)

    @app.api_route("/widget.js", methods=["GET", "HEAD"], include_in_schema=False)
    async def widget() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "widget.js",
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
        )

    app.mount("/static", _PageFiles(directory=STATIC_DIR), name="static")


def _add_error_handlers(app: FastAPI) -> None:
    codes = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        code = codes.get(status, ErrorCode.INVALID_REQUEST if status < 500 else ErrorCode.INTERNAL)
        error = ApiError(code, str(getattr(exc, "detail", "")) or code.value)
        # Routing's 405 names the methods the path takes (RFC 9110 requires
        # `Allow` on a 405); other HTTP errors carry no headers of their own.
        raised = getattr(exc, "headers", None) or {}
        allow = {"Allow": raised["Allow"]} if status == 405 and "Allow" in raised else None
        return error_response(error, getattr(request.state, "request_id", ""), allow)

    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, http_error)
