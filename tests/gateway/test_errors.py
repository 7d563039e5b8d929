"""Every error code the gateway answers with is counted under a metrics
outcome that exists from the start (gateway/metrics.py OUTCOMES), and has a
status of its own."""

from __future__ import annotations

import pytest

from gateway.errors import STATUS, ApiError, ErrorCode
from gateway.metrics import OUTCOMES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("code", list(ErrorCode))
def test_each_code_counts_under_a_known_outcome(code: ErrorCode) -> None:
    assert ApiError(code, "m").outcome in OUTCOMES
    assert code in STATUS
