"""An answer ready after the caller's deadline is DEADLINE_EXCEEDED, never a
late OK (a probe's raw HTTP/2 client, which does not enforce its own
deadline, received OK answers up to 10 ms after it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from services.core.errors import DeadlineExceeded
from services.retriever.servicer import raise_if_past_callers_deadline

pytestmark = pytest.mark.unit


@dataclass
class CallContext:
    """Stands in for grpc.aio.ServicerContext: only its time left is read."""

    remaining: float | None

    def time_remaining(self) -> float | None:
        return self.remaining


@pytest.mark.parametrize("remaining", [None, 0.004, 30.0])
def test_an_answer_in_time_or_without_a_deadline_is_sent(remaining: float | None) -> None:
    raise_if_past_callers_deadline(cast(Any, CallContext(remaining)))


@pytest.mark.parametrize(("remaining", "late_ms"), [(0.0, 0), (-0.0034, 3), (-0.25, 250)])
def test_an_answer_past_the_deadline_says_how_late(remaining: float, late_ms: int) -> None:
    with pytest.raises(DeadlineExceeded, match=f"ready {late_ms} ms after the caller's deadline"):
        raise_if_past_callers_deadline(cast(Any, CallContext(remaining)))
