"""POST /v1/search: every gate in order, then one Retrieve under a deadline.

Order (the origin gate runs earlier, in `OriginMiddleware`):
1. public switch      — off: 503 with the configured message
   release gate       — with RAG_GATEWAY_REQUIRE_RELEASE, 503 until the served
                        index generation passed its release check (a cached
                        IndexStatus, never a search)
2. client rate limit  — counted for every request, valid or not, so malformed
                        floods are limited too; per direct peer, or per the
                        client a trusted proxy names (gateway/clientip.py)
3. body and input     — size, media type, JSON (UTF-8, nesting depth), schema,
                        query length, top_k
4. circuit breaker    — open (or this client paused): 503 at once, before
                        anything is spent
5. daily budget       — spent only by requests that will go downstream
6. Retrieve           — with the time left of the request's deadline, under
                        the breaker (which counts how it went)
Nothing before step 6 searches, so a refusal costs no search.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from gateway import mapping
from gateway.breaker import RetrieverBreaker
from gateway.clientip import client_address
from gateway.errors import ApiError, ErrorCode, error_response
from gateway.jsonbody import parse_json_object
from gateway.metrics import GatewayMetrics
from gateway.querylog import QueryLogPolicy
from gateway.quotas import ClientRateLimiter, DailyBudget, client_key
from gateway.reasons import one_line
from gateway.release_gate import ReleaseGate
from gateway.retriever_client import RetrieverClient, api_error_for
from gateway.schema import SearchLimits, SearchRequest, SearchResponse
from gateway.settings import GatewaySettings
from gateway.tracing import GatewayTracing, describe_response
from rag_client import CallError
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.deadline import Deadline
from services.core.logging import get_logger
from services.runtime.observability.tracing import Tracing

log = get_logger(__name__)

MIN_DOWNSTREAM_S = 0.02  # below this, a Retrieve cannot do useful work
NOT_ON_PAGE = "Nothing on this page matched (the page may not be indexed yet)."


@dataclass
class Gates:
    rate_limiter: ClientRateLimiter
    budget: DailyBudget
    breaker: RetrieverBreaker
    limits: SearchLimits
    release: ReleaseGate


class SearchGateway:
    def __init__(
        self,
        settings: GatewaySettings,
        gates: Gates,
        retriever: RetrieverClient,
        metrics: GatewayMetrics,
        log_policy: QueryLogPolicy,
        tracing: GatewayTracing | None = None,
    ) -> None:
        self.settings = settings
        self.tracing = tracing or GatewayTracing(Tracing.off())
        self.gates = gates
        self.retriever = retriever
        self.metrics = metrics
        self.log_policy = log_policy
        self.trusted_proxies = settings.trusted_proxies

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        deadline = Deadline.after(self.settings.gateway_request_deadline_s)
        request_id: str = getattr(request.state, "request_id", "")
        fields: dict[str, object] = {"request_id": request_id}
        outcome = "internal"
        with self.tracing.request_span(request, request_id) as span:
            response: Response | None = None
            try:
                response = await self._run(request, deadline, request_id, fields)
                outcome = "allowed"
            except ApiError as error:
                outcome = error.outcome
                fields["error"] = error.code.value
                response = error_response(error, request_id)
            finally:
                elapsed = time.perf_counter() - started
                self.metrics.observe(outcome, elapsed)
                describe_response(span, outcome, response.status_code if response else 500)
                log.info("search", outcome=outcome, ms=round(elapsed * 1000, 2), **fields)
            return response

    async def _run(
        self, request: Request, deadline: Deadline, request_id: str, fields: dict[str, object]
    ) -> Response:
        if not self.settings.gateway_public_enabled:
            raise ApiError(ErrorCode.PUBLIC_DISABLED, self.settings.gateway_disabled_message)
        await self.gates.release.check()
        client = client_key(
            client_address(
                request.client.host if request.client else None,
                request.headers.getlist("x-forwarded-for"),
                self.trusted_proxies,
            )
        )
        fields.update(self.log_policy.client_fields(client))
        await self.gates.rate_limiter.acquire(client)
        search = await self._read_request(request)
        query = self.gates.limits.check(search)
        fields.update(self.log_policy.query_fields(query))
        await self.gates.breaker.check(client)  # refused now: nothing spent
        await self.gates.budget.spend(client)
        debug = search.debug and self.settings.gateway_allow_debug
        top_k = search.top_k or self.settings.gateway_default_top_k
        retrieve_request = mapping.to_retrieve_request(search, query, top_k, debug)
        reply = await self._retrieve(retrieve_request, deadline, client)
        note = NOT_ON_PAGE if search.this_page and not reply.hits else ""
        trusted = debug and self.settings.gateway_debug_reasons
        body = mapping.to_search_response(reply, request_id, debug, note, trusted)
        _log_reasons(reply, body, request_id)
        fields.update(intent=body.intent, hits=len(body.hits), rerank_used=body.rerank.used)
        payload = body.model_dump(mode="json", exclude_none=True)
        if where := non_finite_at(payload):
            # JSON has no NaN or infinity: never sent, whatever the Retriever says.
            log.error("retriever_non_finite_number", request_id=request_id, field=where)
            raise ApiError(
                ErrorCode.UPSTREAM_UNAVAILABLE, "the search backend sent an answer it cannot show"
            )
        return JSONResponse(payload, headers={"Cache-Control": "no-store"})

    async def _read_request(self, request: Request) -> SearchRequest:
        check_body_media(request)
        raw = await read_bounded_body(
            request, self.settings.gateway_max_body_bytes, self.settings.gateway_body_timeout_s
        )
        data = parse_json_object(raw, self.settings.gateway_max_json_depth)
        try:
            return SearchRequest.model_validate(data)
        except ValidationError as exc:
            raise ApiError(ErrorCode.INVALID_REQUEST, describe_validation(exc)) from None

    async def _retrieve(
        self, request: pb.RetrieveRequest, deadline: Deadline, client: str
    ) -> pb.RetrieveResponse:
        if deadline.expired(MIN_DOWNSTREAM_S):
            raise ApiError(ErrorCode.UPSTREAM_TIMEOUT, "the request ran out of time")
        try:
            async with self.gates.breaker.guard(client, checked=True):
                reply = await self.retriever.retrieve(request, timeout_s=deadline.budget())
        except CallError as exc:
            self.metrics.retriever_calls.labels(code=exc.code.name).inc()
            raise api_error_for(exc) from None
        self.metrics.retriever_calls.labels(code="OK").inc()
        return reply


def _log_reasons(reply: pb.RetrieveResponse, body: SearchResponse, request_id: str) -> None:
    """The Retriever's own words for a degraded answer, at DEBUG: degraded
    answers are counted in the Retriever's metrics, and a failure is logged
    once, by the Retriever, with the same request id."""
    if not reply.degraded and not reply.rerank.fallback:
        return
    log.debug(
        "retriever_degraded",
        request_id=request_id,
        degraded=[
            {"component": raw.component, "code": public.code.value, "reason": one_line(raw.reason)}
            for raw, public in zip(reply.degraded, body.degraded, strict=True)
        ],
        rerank_code=body.rerank.code.value,
        rerank_reason=one_line(reply.rerank.reason),
    )


def check_body_media(request: Request) -> None:
    """415 unless the body is plain UTF-8 JSON: one Content-Type (with two, a
    proxy and the app could each read another), `application/json`, no other
    charset, and no Content-Encoding (a compressed body would otherwise be
    read as JSON text and refused as malformed, which misleads its sender)."""
    values = request.headers.getlist("content-type")
    media_type, _, parameters = (values[0] if values else "").partition(";")
    if media_type.strip().lower() != "application/json" or len(values) > 1:
        raise ApiError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, "send the body as application/json")
    charset = _parameter(parameters, "charset")
    if charset is not None and charset.lower() not in ("utf-8", "utf8"):
        raise ApiError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type charset {charset[:40]!r} is not accepted; send the body as UTF-8",
        )
    encodings = [
        token.strip().lower()
        for value in request.headers.getlist("content-encoding")
        for token in value.split(",")
    ]
    if any(token not in ("", "identity") for token in encodings):
        raise ApiError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "Content-Encoding is not accepted on a search; send the body uncompressed",
        )


def _parameter(parameters: str, name: str) -> str | None:
    """The value of media-type parameter `name` (quotes removed), or None."""
    for item in parameters.split(";"):
        key, sep, value = item.partition("=")
        if sep and key.strip().lower() == name:
            return value.strip().strip('"')
    return None


async def read_bounded_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed `max_bytes`
    (by Content-Length, or while streaming one sent without it), and with 408
    if it is not whole within `timeout_s` (a body that stops mid-way, or a
    chunked one that never ends, would otherwise hold its request open)."""
    too_large = ApiError(ErrorCode.BODY_TOO_LARGE, f"the body exceeds {max_bytes} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError:
        message = f"the body did not arrive whole within {timeout_s:g} s"
        raise ApiError(ErrorCode.BODY_TIMEOUT, message) from None
    except ClientDisconnect:
        # The client hung up before its body was whole: a bad request (no
        # one reads the answer), not an internal error with a traceback.
        raise ApiError(ErrorCode.INVALID_JSON, "the body ended before it was complete") from None
    return b"".join(chunks)


def non_finite_at(value: Any, where: str = "") -> str:
    """Where the first NaN or infinity in a JSON-ready tree is ("" if none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "body"
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return ""
    for key, item in items:
        if found := non_finite_at(item, f"{where}.{key}" if where else str(key)):
            return found
    return ""


def describe_validation(exc: ValidationError) -> str:
    """One readable line per problem, without echoing the input back."""
    problems = []
    for err in exc.errors()[:3]:
        where = ".".join(str(part) for part in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)
