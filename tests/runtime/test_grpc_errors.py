"""A failure that says the machine is short of a resource is UNAVAILABLE with
the shortage named (and logged as an error), not INTERNAL; other failures of
ours stay INTERNAL with nothing of their message sent."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from services.core.errors import StoreError
from services.runtime.grpc_errors import unary
from tests.core.test_errors import TANTIVY_EMFILE

pytestmark = pytest.mark.unit


class _Aborted(Exception):
    pass


class RecordingContext:
    """Stands in for grpc.aio's servicer context: records the abort (which,
    like grpc's, does not return)."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise _Aborted


def _failing(error: Exception) -> Any:
    @unary
    async def Upsert(self: Any, request: Any, context: Any) -> None:
        raise error

    return Upsert


def _native_emfile() -> StoreError:
    try:
        try:
            raise ValueError(TANTIVY_EMFILE)
        except ValueError as native:
            raise StoreError(f"tantivy: upsert failed: {native}") from native
    except StoreError as wrapped:
        return wrapped


async def test_out_of_descriptors_is_unavailable_and_names_it() -> None:
    context = RecordingContext()
    with pytest.raises(_Aborted):
        await _failing(_native_emfile())(None, None, context)
    assert context.code == grpc.StatusCode.UNAVAILABLE
    assert context.details.startswith("the server is out of open file descriptors: send")


async def test_any_other_failure_of_ours_stays_internal_and_says_nothing() -> None:
    context = RecordingContext()
    with pytest.raises(_Aborted):
        await _failing(StoreError("tantivy: upsert failed: Schema mismatch"))(None, None, context)
    assert (context.code, context.details) == (
        grpc.StatusCode.INTERNAL,
        "internal error (logged by the server)",
    )
