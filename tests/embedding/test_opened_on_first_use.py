"""OpenedOnFirstUse: the wrapped encoder is opened by the first `encode`,
once, however many threads ask at the same moment. The opener below is a
counting stand-in (a fake: the real one opens an ONNX Runtime session, which
tests/embedding/test_e5_backend.py covers on the real model)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from services.embedding.text_encoders import OpenedOnFirstUse, TextEncoder

pytestmark = pytest.mark.unit


class RowPerText:
    name = "rows"

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray([[float(len(t))] for t in texts], dtype=np.float32)


class CountingOpener:
    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def __call__(self) -> TextEncoder:
        self.calls += 1
        self.release.wait(5)
        return RowPerText()


def test_nothing_is_opened_before_the_first_encode() -> None:
    opener = CountingOpener()
    encoder = OpenedOnFirstUse("rows", opener)
    assert (opener.calls, encoder.opened, encoder.name) == (0, False, "rows")
    opener.release.set()
    assert encoder.encode(["ab", "abc"]).tolist() == [[2.0], [3.0]]
    assert (opener.calls, encoder.opened) == (1, True)
    encoder.encode(["x"])
    assert opener.calls == 1


def test_threads_arriving_together_open_it_once() -> None:
    opener = CountingOpener()
    encoder = OpenedOnFirstUse("rows", opener)
    with ThreadPoolExecutor(4) as pool:
        results = [pool.submit(encoder.encode, ["a" * n]) for n in range(1, 5)]
        opener.release.set()
        rows = [future.result(timeout=5).tolist() for future in results]
    assert rows == [[[1.0]], [[2.0]], [[3.0]], [[4.0]]]
    assert opener.calls == 1


def test_a_failed_open_is_raised_and_tried_again_next_time() -> None:
    attempts: list[int] = []

    def flaky() -> TextEncoder:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("session could not start")
        return RowPerText()

    encoder = OpenedOnFirstUse("rows", flaky)
    with pytest.raises(RuntimeError, match="could not start"):
        encoder.encode(["a"])
    assert not encoder.opened
    assert encoder.encode(["ab"]).tolist() == [[2.0]]
    assert len(attempts) == 2
