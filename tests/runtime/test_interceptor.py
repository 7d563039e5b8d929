"""The shared interceptor shape (services.runtime.interceptor): an unknown
method passes through untouched, a known one is handed to `wrap` (unit)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from services.runtime.interceptor import HandlerInterceptor

pytestmark = pytest.mark.unit


class Details:
    method = "/rag.retriever.v1.Retriever/Retrieve"


class Tagging(HandlerInterceptor):
    """Records what it was asked to wrap and hands back a marked handler."""

    def __init__(self) -> None:
        self.wrapped: list[tuple[Any, str]] = []

    def wrap(self, handler: Any, details: Any) -> Any:
        self.wrapped.append((handler, details.method))
        return ("wrapped", handler)


def _intercept(interceptor: HandlerInterceptor, handler: Any) -> Any:
    async def continuation(details: grpc.HandlerCallDetails) -> Any:
        return handler

    return asyncio.run(interceptor.intercept_service(continuation, Details()))  # type: ignore[arg-type]


def test_an_unknown_method_passes_through_unwrapped() -> None:
    interceptor = Tagging()
    assert _intercept(interceptor, None) is None
    assert interceptor.wrapped == []


def test_a_known_method_is_wrapped_once_with_its_details() -> None:
    interceptor = Tagging()
    handler = object()
    assert _intercept(interceptor, handler) == ("wrapped", handler)
    assert interceptor.wrapped == [(handler, Details.method)]
