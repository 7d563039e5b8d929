"""How many HNSW candidates a vector search asks for, by the size of the index."""

from __future__ import annotations

import pytest

from services.core.errors import ConfigError
from services.runtime.settings import load_settings
from services.storage.base import MAX_SEARCH_EF, PointCount, SearchEf, VectorQuantization
from services.storage.settings import StoreSettings
from tests.support.clock import ManualClock

pytestmark = pytest.mark.unit


def test_up_to_the_growth_point_a_search_asks_for_the_floor() -> None:
    ef = SearchEf(floor=256, growth=0.6, grows_above=100_000)
    assert ef.candidates(50) == 256
    assert ef.candidates(50, 12_500) == 256
    assert ef.candidates(50, 100_000) == 256


def test_a_larger_index_asks_for_more_candidates() -> None:
    ef = SearchEf(floor=256, growth=0.6, grows_above=100_000)
    at_300k, at_1m = ef.candidates(50, 300_000), ef.candidates(50, 1_000_000)
    assert at_300k == 495  # 256 x 3 ** 0.6, rounded up
    assert at_1m == 1020  # 256 x 10 ** 0.6
    assert ef.candidates(50, 10**9) == MAX_SEARCH_EF


def test_no_growth_and_deep_searches() -> None:
    assert SearchEf(floor=256, growth=0).candidates(50, 10**7) == 256
    # A deep search (the eval asks 300) never gets fewer than 2 x its limit.
    assert SearchEf(floor=256, growth=0).candidates(300) == 600


def test_the_settings_give_the_floor_and_the_growth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_VECTOR_SEARCH_EF", "128")
    monkeypatch.setenv("RAG_VECTOR_SEARCH_EF_GROWTH", "0")
    search = StoreSettings().vector_search
    assert (search.floor, search.growth) == (128, 0)
    monkeypatch.setenv("RAG_VECTOR_SEARCH_EF_GROWTH", "1.5")
    with pytest.raises(ValueError, match="vector_search_ef_growth"):
        StoreSettings()


def test_the_point_count_is_read_again_only_after_its_ttl() -> None:
    clock, reads = ManualClock(), [10, 20, -1]
    count = PointCount(ttl_s=10.0, clock=clock)
    assert count.get(lambda: reads.pop(0)) == 10
    clock.now += 9.9
    assert count.get(lambda: reads.pop(0)) == 10  # kept: not read
    clock.now += 0.1
    assert count.get(lambda: reads.pop(0)) == 20
    clock.now += 10
    assert count.get(lambda: reads.pop(0)) == 0  # PostgreSQL's -1 (never analysed)


def test_vector_quantization_is_int8_unless_set_and_refuses_other_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert StoreSettings().vector_quantization is VectorQuantization.INT8
    monkeypatch.setenv("RAG_VECTOR_QUANTIZATION", "none")
    assert StoreSettings().vector_quantization is VectorQuantization.NONE
    monkeypatch.setenv("RAG_VECTOR_QUANTIZATION", "int4")
    with pytest.raises(ConfigError, match=r"RAG_VECTOR_QUANTIZATION.*int8"):
        load_settings(StoreSettings)
