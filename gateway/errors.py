"""Every error the gateway answers, as JSON with a stable code.

Clients branch on `error.code` (never on the message, which is for people):

    {"error": {"code": "rate_limited", "message": "...", "request_id": "..."}}

The codes and their HTTP statuses are part of the public API; add new ones,
never rename or repurpose one.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, Field
from starlette.responses import JSONResponse


class ErrorCode(StrEnum):
    PUBLIC_DISABLED = "public_disabled"
    RELEASE_NOT_CURRENT = "release_not_current"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    RATE_LIMITED = "rate_limited"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BREAKER_OPEN = "breaker_open"
    LIMITER_UNAVAILABLE = "limiter_unavailable"
    BODY_TOO_LARGE = "body_too_large"
    BODY_TIMEOUT = "body_timeout"
    HEADERS_TOO_LARGE = "headers_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    INVALID_JSON = "invalid_json"
    JSON_TOO_DEEP = "json_too_deep"
    INVALID_REQUEST = "invalid_request"
    QUERY_TOO_LONG = "query_too_long"
    TOP_K_OUT_OF_RANGE = "top_k_out_of_range"
    UPSTREAM_REJECTED = "upstream_rejected"
    SCOPE_NOT_ALLOWED = "scope_not_allowed"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    UPSTREAM_TIMEOUT = "upstream_timeout"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INTERNAL = "internal"
    PAGE_EXPIRED = "page_expired"
    INVALID_PAGE_TOKEN = "invalid_page_token"


STATUS: dict[ErrorCode, int] = {
    ErrorCode.PUBLIC_DISABLED: 503,
    ErrorCode.RELEASE_NOT_CURRENT: 503,
    ErrorCode.ORIGIN_NOT_ALLOWED: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.BUDGET_EXHAUSTED: 429,
    ErrorCode.BREAKER_OPEN: 503,
    ErrorCode.LIMITER_UNAVAILABLE: 503,
    ErrorCode.BODY_TOO_LARGE: 413,
    ErrorCode.BODY_TIMEOUT: 408,
    ErrorCode.HEADERS_TOO_LARGE: 431,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.JSON_TOO_DEEP: 400,
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.QUERY_TOO_LONG: 422,
    ErrorCode.TOP_K_OUT_OF_RANGE: 422,
    ErrorCode.UPSTREAM_REJECTED: 400,
    ErrorCode.SCOPE_NOT_ALLOWED: 403,
    ErrorCode.UPSTREAM_UNAVAILABLE: 502,
    ErrorCode.UPSTREAM_TIMEOUT: 504,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.INTERNAL: 500,
    ErrorCode.PAGE_EXPIRED: 409,
    ErrorCode.INVALID_PAGE_TOKEN: 400,
}

# Metric outcomes that differ from the code: input errors share one label.
OUTCOME: dict[ErrorCode, str] = {
    ErrorCode.ORIGIN_NOT_ALLOWED: "origin_rejected",
    ErrorCode.BODY_TOO_LARGE: "invalid",
    ErrorCode.BODY_TIMEOUT: "invalid",
    ErrorCode.HEADERS_TOO_LARGE: "invalid",
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: "invalid",
    ErrorCode.INVALID_JSON: "invalid",
    ErrorCode.JSON_TOO_DEEP: "invalid",
    ErrorCode.INVALID_REQUEST: "invalid",
    ErrorCode.QUERY_TOO_LONG: "invalid",
    ErrorCode.TOP_K_OUT_OF_RANGE: "invalid",
    ErrorCode.NOT_FOUND: "invalid",
    ErrorCode.METHOD_NOT_ALLOWED: "invalid",
    ErrorCode.INVALID_PAGE_TOKEN: "upstream_rejected",
    # The Retriever refused these too: a token of an older index, a scope
    # the gateway's credential does not cover.
    ErrorCode.PAGE_EXPIRED: "upstream_rejected",
    ErrorCode.SCOPE_NOT_ALLOWED: "upstream_rejected",
}


class ApiError(Exception):
    """Raised anywhere in a request; rendered by `error_response`."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def status(self) -> int:
        return STATUS[self.code]

    @property
    def outcome(self) -> str:
        """The metrics label (see `gateway.metrics.OUTCOMES`)."""
        return OUTCOME.get(self.code, self.code.value)


class ErrorDetail(BaseModel):
    code: ErrorCode
    message: str
    request_id: str = ""
    retry_after_s: int | None = Field(
        None,
        description="Set with 429, 503 and a 502 from an unreachable backend: "
        "when waiting helps, how long (also the Retry-After header)",
    )


class ErrorBody(BaseModel):
    error: ErrorDetail


def error_response(
    error: ApiError, request_id: str = "", headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The API's JSON error; `headers` adds what the status requires (a 405's
    `Allow`)."""
    detail = ErrorDetail(
        code=error.code,
        message=error.message,
        request_id=request_id,
        retry_after_s=error.retry_after_s,
    )
    sent = {**(headers or {}), "Cache-Control": "no-store"}
    if error.retry_after_s is not None:
        sent["Retry-After"] = str(error.retry_after_s)
    return JSONResponse(
        ErrorBody(error=detail).model_dump(mode="json", exclude_none=True),
        status_code=error.status,
        headers=sent,
    )
