"""Boosts after fusion (services.retriever.boosts): the decay functions by
hand, the order they make, their bounds, and through a real stack on rank
(documents that differ only in their updated_at or metadata)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.deadline import Deadline
from services.core.errors import InvalidArgument
from services.embedding.embedder import Embedder
from services.retriever.boost_step import BoostStep
from services.retriever.boosts import (
    Boosts,
    DecayFunction,
    MetadataBoost,
    RecencyBoost,
    apply_boosts,
    check_boosts,
)
from services.retriever.exact import ExactPrecedence
from tests.retriever.factories import hit
from tests.support.stack import BackgroundStack

NOW = datetime(2026, 11, 26, tzinfo=UTC)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("function", "age", "expected"),
    [
        (DecayFunction.EXP, 0, 1.0),
        (DecayFunction.EXP, 10, 1.0),  # within the offset
        (DecayFunction.EXP, 40, 0.5),  # offset + scale: the decay itself
        (DecayFunction.EXP, 70, 0.25),
        (DecayFunction.GAUSS, 40, 0.5),
        (DecayFunction.GAUSS, 70, 0.5**4),
        (DecayFunction.LINEAR, 40, 0.5),
        (DecayFunction.LINEAR, 70, 0.0),
        (DecayFunction.LINEAR, 500, 0.0),
    ],
)
def test_decay_functions_as_elasticsearch_defines_them(
    function: DecayFunction, age: float, expected: float
) -> None:
    boost = RecencyBoost(weight=1, scale_days=30, offset_days=10, decay=0.5, function=function)
    assert boost.factor(age) == pytest.approx(expected)


@pytest.mark.unit
def test_boosts_multiply_the_fused_score_and_reorder() -> None:
    old = hit("old", 0.030, doc_id="old")
    new = hit("new", 0.020, doc_id="new")
    undated = hit("undated", 0.025, doc_id="undated")
    updated = {("old", "en"): "2024-11-26T00:00:00Z", ("new", "en"): "2026-11-25T00:00:00Z"}
    recency = RecencyBoost(weight=1.0, scale_days=30)
    ranked = apply_boosts([old, undated, new], Boosts(recency), updated, NOW)
    assert [h.chunk.chunk_id for h in ranked] == ["new", "old", "undated"]
    assert ranked[0].boost == pytest.approx(1 + 0.5 ** (1 / 30))
    assert ranked[2].boost == 1.0 and ranked[2].boost_reasons == ()
    assert "updated 2026-11-25T00:00:00Z, 1.0 days old" in ranked[0].boost_reasons[0]


@pytest.mark.unit
def test_a_page_dated_in_the_future_decays_by_its_distance_not_stays_newest() -> None:
    # Probe: "2999-01-01" once took the full boost for ever, above today's page.
    future = hit("future", 0.025, doc_id="future")
    today = hit("today", 0.025, doc_id="today")
    soon = hit("soon", 0.025, doc_id="soon")
    updated = {
        ("future", "en"): "2999-01-01",
        ("today", "en"): "2026-11-26T00:00:00Z",
        ("soon", "en"): "2026-11-27T00:00:00Z",  # a writer's clock a day ahead
    }
    recency = RecencyBoost(weight=1.0, scale_days=30)
    ranked = apply_boosts([future, soon, today], Boosts(recency), updated, NOW)
    assert [h.chunk.chunk_id for h in ranked] == ["today", "soon", "future"]
    assert ranked[1].boost == pytest.approx(1 + 0.5 ** (1 / 30))
    assert ranked[2].boost == pytest.approx(1.0)
    assert ranked[2].boost_reasons == ("recency +0 (updated 2999-01-01, 355052.0 days ahead)",)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("stamp", "days"),
    [
        ("2026-11-25", 1.0),  # a full-date, as the Indexer accepts it: its midnight, UTC
        ("2026-11-25t00:00:00z", 1.0),  # RFC 3339 allows lower case
        ("2026-11-24T23:59:60Z", 1.0),  # a leap second reads as :59
        ("2026-11-25T00:00:00+01:00", 1 + 1 / 24),
    ],
)
def test_every_updated_at_the_indexer_accepts_gets_its_recency_boost(
    stamp: str, days: float
) -> None:
    """These once got no recency boost at all, as if the page were undated."""
    recency = RecencyBoost(weight=1, scale_days=30)
    (boosted,) = apply_boosts(
        [hit("a", 0.03, doc_id="a")], Boosts(recency), {("a", "en"): stamp}, NOW
    )
    assert boosted.boost == pytest.approx(1 + recency.factor(days), abs=1e-4)
    assert f"updated {stamp}" in boosted.boost_reasons[0]


@pytest.mark.unit
def test_metadata_boosts_add_for_each_match_and_nothing_from_nothing() -> None:
    api = hit("api", 0.010, doc_id="api")
    api.chunk.metadata.update(product="api", tier="pro")
    cli = hit("cli", 0.012, doc_id="cli")
    cli.chunk.metadata.update(product="cli")
    zero = hit("zero", 0.0, doc_id="zero")
    zero.chunk.metadata.update(product="api")
    boosts = Boosts(
        metadata=(MetadataBoost("product", "api", 0.5), MetadataBoost("tier", "pro", 0.5))
    )
    ranked = apply_boosts([cli, zero, api], boosts, {}, NOW)
    assert [h.chunk.chunk_id for h in ranked] == ["api", "cli", "zero"]
    assert ranked[0].boost == 2.0 and len(ranked[0].boost_reasons) == 2
    assert ranked[2].fused_score * ranked[2].boost == 0.0  # no relevance stays none


@pytest.mark.unit
@pytest.mark.parametrize(
    ("boosts", "field"),
    [
        (Boosts(RecencyBoost(weight=0.5, scale_days=0)), "boosts.recency.scale_days"),
        (Boosts(RecencyBoost(weight=11, scale_days=5)), "boosts.recency.weight"),
        (Boosts(RecencyBoost(weight=1, scale_days=5, decay=1.0)), "boosts.recency.decay"),
        (
            Boosts(RecencyBoost(weight=1, scale_days=5, offset_days=-1)),
            "boosts.recency.offset_days",
        ),
        (Boosts(RecencyBoost(weight=1, scale_days=float("inf"))), "boosts.recency.scale_days"),
        (Boosts(metadata=(MetadataBoost("k", "v", -1),)), "boosts.metadata[0].weight"),
        (Boosts(metadata=(MetadataBoost("", "v", 1),)), "boosts.metadata[0].key"),
        (Boosts(metadata=(MetadataBoost("k", "v", 1),) * 17), "boosts.metadata"),
    ],
)
def test_out_of_bounds_boosts_are_refused_naming_the_field(boosts: Boosts, field: str) -> None:
    with pytest.raises(InvalidArgument, match=field.replace("[", r"\[").replace("]", r"\]")):
        check_boosts(boosts)


# ---------------------------------------------------------------- real stack

BODY = "Rotate the signing keys every quarter and revoke the old key after the rotation."


def _page(doc_id: str, updated_at: str, product: str) -> ipb.Document:
    return ipb.Document(
        doc_id=doc_id,
        url=f"https://docs.example/{doc_id}",
        title="Key rotation",
        locale="en",
        scope_id="site",
        updated_at=updated_at,
        metadata={"product": product},
        text=f"# Key rotation\n\n{BODY} ({doc_id})",
    )


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("boosts"), embedder).start()
    pages = [
        _page("rotation-2019.md", "2019-03-01T00:00:00Z", "legacy"),
        _page("rotation-2026.md", "2026-11-01T00:00:00Z", "api"),
        _page("rotation-2023.md", "2023-06-01T00:00:00Z", "api"),
    ]
    assert stack.upsert(pages).counts.added == 3
    yield stack
    stack.stop()


def _ask(stack: BackgroundStack, **boosts: Any) -> list[rpb.Hit]:
    reply = stack.retrieve(
        "how often should signing keys be rotated",
        top_k=3,
        disable_rerank=True,
        boosts=rpb.Boosts(**boosts),
    )
    return list(reply.hits)


@pytest.mark.integration
def test_recency_puts_the_newest_page_first(stack: BackgroundStack) -> None:
    recency = rpb.RecencyBoost(weight=2.0, scale_days=365, origin="2026-11-26T00:00:00Z")
    hits = _ask(stack, recency=recency)
    assert [h.doc_id for h in hits] == ["rotation-2026.md", "rotation-2023.md", "rotation-2019.md"]
    assert hits[0].boost > hits[1].boost > hits[2].boost > 1.0
    assert hits[0].score == pytest.approx(hits[0].fused_score * hits[0].boost)
    assert "days old" in hits[0].boost_reasons[0]


@pytest.mark.integration
def test_a_metadata_boost_puts_matching_pages_first(stack: BackgroundStack) -> None:
    hits = _ask(stack, metadata=[rpb.MetadataBoost(key="product", value="legacy", weight=5.0)])
    assert hits[0].doc_id == "rotation-2019.md" and hits[0].boost == 6.0
    assert all(h.boost == 1.0 for h in hits[1:])


@pytest.mark.integration
def test_boosts_out_of_bounds_are_invalid_argument(stack: BackgroundStack) -> None:
    for boosts, field in [
        (
            rpb.Boosts(recency=rpb.RecencyBoost(weight=1, scale_days=-3)),
            "boosts.recency.scale_days",
        ),
        (
            rpb.Boosts(recency=rpb.RecencyBoost(weight=1, scale_days=3, origin="yesterday")),
            "origin",
        ),
        (rpb.Boosts(metadata=[rpb.MetadataBoost(key="k", value="v", weight=99)]), "weight"),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            stack.retrieve("keys", boosts=boosts)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in (err.value.details() or "")


class _FailingManifest:
    """A fake manifest, only to inject a fault: every read fails."""

    def get_many(self, keys: object, deadline: object = None) -> dict[object, object]:
        raise OSError("disk gone")


@pytest.mark.unit
async def test_recency_is_skipped_with_a_note_when_the_manifest_fails() -> None:
    hits = [hit("a", 0.02, doc_id="a"), hit("b", 0.01, doc_id="b")]
    hits[1].chunk.metadata["product"] = "api"
    boosts = Boosts(RecencyBoost(weight=1, scale_days=30), (MetadataBoost("product", "api", 2.0),))
    with ThreadPoolExecutor(1) as pool:
        step = BoostStep(_FailingManifest(), pool, ExactPrecedence.LEAD, 0.5)  # type: ignore[arg-type]
        ranked, note = await step.run(hits, boosts, NOW, Deadline.after(1.0))
    assert "recency boost skipped" in note
    assert [h.chunk.chunk_id for h in ranked] == ["b", "a"]  # the metadata boost still applies


@pytest.mark.integration
def test_pages_with_a_recency_boost_keep_the_first_pages_clock(stack: BackgroundStack) -> None:
    boosts = rpb.Boosts(recency=rpb.RecencyBoost(weight=1.0, scale_days=30))  # origin: now
    ask = dict(query="signing keys rotation", disable_rerank=True, boosts=boosts)
    whole = stack.retrieve(top_k=3, **ask)  # type: ignore[arg-type]
    first = stack.retrieve(top_k=1, **ask)  # type: ignore[arg-type]
    rest = stack.retrieve(top_k=2, page_token=first.next_page_token, **ask)  # type: ignore[arg-type]
    joined = [h.chunk_id for h in (*first.hits, *rest.hits)]
    assert joined == [h.chunk_id for h in whole.hits]
    # The same clock to the second (whole and first may straddle one tick).
    assert [h.boost for h in rest.hits] == pytest.approx(
        [h.boost for h in whole.hits[1:]], rel=1e-4
    )
