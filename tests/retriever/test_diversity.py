"""Diversity by MMR (services.retriever.diversity): a hand-computed order,
its bounds, and through a real stack on rank: near-duplicate passages of one
page stop filling the top of the list."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.errors import InvalidArgument
from services.embedding.embedder import Embedder
from services.retriever.diversity import Diversity, check_diversity, mmr
from tests.retriever.factories import hit
from tests.support.stack import BackgroundStack


def _ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.chunk.chunk_id for h in hits]


@pytest.mark.unit
def test_mmr_moves_a_near_duplicate_below_a_different_hit() -> None:
    hits = [hit(c) for c in ("a", "a-copy", "b", "c")]
    vectors = {"a": [1.0, 0.0], "a-copy": [0.99, 0.14], "b": [0.0, 1.0], "c": [0.6, 0.8]}
    # λ = 0.5: after a, a-copy gains 0.5·(2/3) − 0.5·0.99 < b's 0.5·(1/3) − 0.5·0.
    # Then a-copy (−0.16) before c (0.5·0 − 0.5·0.8 = −0.4, close to b).
    assert _ids(mmr(hits, vectors, 0.5, window=10)) == ["a", "b", "a-copy", "c"]
    assert _ids(mmr(hits, vectors, 1.0, window=10)) == ["a", "a-copy", "b", "c"]
    # Only the window is reordered; the rest follows in its order.
    assert _ids(mmr(hits, vectors, 0.5, window=2)) == ["a", "a-copy", "b", "c"]


@pytest.mark.unit
def test_hits_without_a_stored_vector_are_similar_to_nothing() -> None:
    hits = [hit(c) for c in ("a", "a-copy", "unknown")]
    vectors = {"a": [1.0, 0.0], "a-copy": [1.0, 0.0]}
    assert _ids(mmr(hits, vectors, 0.5, window=10)) == ["a", "unknown", "a-copy"]


@pytest.mark.unit
@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=0, max_size=30),
    st.floats(0.01, 1.0),
    st.integers(0, 40),
)
def test_mmr_is_a_permutation_that_keeps_the_first_hit(
    points: list[tuple[float, float]], lam: float, window: int
) -> None:
    hits = [hit(f"c{i}") for i in range(len(points))]
    vectors = {f"c{i}": [x, y] for i, (x, y) in enumerate(points)}
    out = mmr(hits, vectors, lam, window)
    assert sorted(_ids(out)) == sorted(_ids(hits))
    if hits:
        assert out[0] is hits[0]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("diversity", "field"),
    [
        (Diversity(-0.1), "diversity.mmr_lambda"),
        (Diversity(1.5), "diversity.mmr_lambda"),
        (Diversity(float("nan")), "diversity.mmr_lambda"),
        (Diversity(0.5, 201), "diversity.window"),
    ],
)
def test_out_of_bounds_diversity_is_refused_naming_the_field(
    diversity: Diversity, field: str
) -> None:
    with pytest.raises(InvalidArgument, match=field):
        check_diversity(diversity)


# ---------------------------------------------------------------- real stack

REPEATED = "To rotate the signing key, create a new key, deploy it, then revoke the old key."


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("diversity"), embedder).start()
    # One page whose sections all say the same thing, and pages that each
    # answer the question differently.
    # Sections of ~900 characters: about one chunk each.
    sections = "\n\n".join(f"## Variant {i}\n\n" + " ".join([REPEATED] * 11) for i in range(6))
    pages = [
        ipb.Document(
            doc_id="repeats.md", locale="en", scope_id="site", text=f"# Keys\n\n{sections}"
        ),
        ipb.Document(
            doc_id="schedule.md",
            locale="en",
            scope_id="site",
            text="# Rotation schedule\n\nSigning keys are rotated every ninety days by the "
            "security team; emergencies trigger an immediate rotation.",
        ),
        ipb.Document(
            doc_id="hsm.md",
            locale="en",
            scope_id="site",
            text="# Hardware modules\n\nKeys kept in the HSM are rotated with its own console, "
            "which re-wraps every stored signing key.",
        ),
    ]
    assert stack.upsert(pages).counts.added == 3
    yield stack
    stack.stop()


QUESTION = "how do I rotate the signing key"


def _docs(stack: BackgroundStack, **fields: object) -> list[str]:
    reply = stack.retrieve(
        QUESTION, top_k=4, max_chunks_per_document=6, disable_rerank=True, **fields
    )
    return [h.doc_id for h in reply.hits]


@pytest.mark.integration
def test_diversity_lets_other_pages_into_the_top(stack: BackgroundStack) -> None:
    plain = _docs(stack)
    diverse = _docs(stack, diversity=rpb.Diversity(mmr_lambda=0.3))
    assert plain[:3] == ["repeats.md"] * 3  # the near-duplicates crowd the top
    assert diverse[0] == plain[0]  # the best hit stays first
    assert {"schedule.md", "hsm.md"} <= set(diverse[:3])
    reply = stack.retrieve(QUESTION, debug=True, diversity=rpb.Diversity(mmr_lambda=0.3))
    assert any(note.startswith("diversity: MMR") for note in reply.debug.notes)


@pytest.mark.integration
def test_diversity_out_of_bounds_is_invalid_argument(stack: BackgroundStack) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stack.retrieve(QUESTION, diversity=rpb.Diversity(mmr_lambda=2))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "diversity.mmr_lambda" in (err.value.details() or "")
