"""The ONNX Runtime embedding path against the torch one on the real model:
same vectors (fp32), padding-independent, exported once into its cache and
never into the working directory."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

from services.core.errors import ConfigError
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder, resolve_model_path
from services.embedding.text_encoders import OnnxTextEncoder, similar_length_groups
from tests.support.corpus import CORPUS_DIR

pytestmark = pytest.mark.integration

SCIFACT_QUERIES = Path(__file__).resolve().parents[3] / "shared/datasets/scifact/queries-test.jsonl"


def sample_queries(count: int = 100) -> list[str]:
    if not SCIFACT_QUERIES.exists():
        return [f"question {n}: how does part {n} of the system fail?" for n in range(count)]
    lines = SCIFACT_QUERIES.read_text(encoding="utf-8").splitlines()[:count]
    return [json.loads(line)["text"] for line in lines]


def corpus_texts() -> list[str]:
    """Whole Markdown files: several exceed the 256-token limit (truncation)."""
    return [path.read_text(encoding="utf-8") for path in sorted(CORPUS_DIR.glob("*.md"))]


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache: Path) -> Embedder:
    return Embedder(EmbedderConfig(backend="onnx", onnx_cache_dir=onnx_cache, query_cache_size=0))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_onnx_vectors_match_torch(embedder: Embedder, onnx_embedder: Embedder) -> None:
    assert onnx_embedder.backend == "onnx"
    for texts in (sample_queries(), corpus_texts()):
        torch_vectors = embedder.embed_documents(texts)
        onnx_vectors = onnx_embedder.embed_documents(texts)
        assert cosines(torch_vectors, onnx_vectors).min() >= 0.9999
        np.testing.assert_allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_padding_in_a_batch_leaves_vectors_unchanged(
    backend: str, embedder: Embedder, onnx_embedder: Embedder
) -> None:
    model = embedder if backend == "torch" else onnx_embedder
    texts = ["billing", *sample_queries(15), corpus_texts()[0]]
    batched = model.embed_documents(texts)
    alone = np.stack([model.embed_documents([text])[0] for text in texts])
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_onnx_queries_go_through_micro_batching(onnx_embedder: Embedder) -> None:
    before = onnx_embedder.query_stats().queries
    vector = onnx_embedder.embed_query("how are rate limits enforced")
    assert vector.shape == (onnx_embedder.dim,)
    assert onnx_embedder.query_stats().queries == before + 1


def test_export_lands_in_the_cache_and_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, cache = tmp_path / "cwd", tmp_path / "cache"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    config = EmbedderConfig(backend="onnx", onnx_cache_dir=cache, query_cache_size=0)
    Embedder(config)
    [export] = cache.rglob("*.onnx")
    stamp = export.stat().st_mtime_ns
    again = Embedder(config)
    assert list(cache.rglob("*.onnx")) == [export]
    assert export.stat().st_mtime_ns == stamp
    assert again.embed_query("billing").shape == (again.dim,)
    assert list(workdir.iterdir()) == []


def test_onnx_refuses_a_model_it_cannot_pool_like_the_original(tmp_path: Path) -> None:
    transformer = Transformer(resolve_model_path(""))
    cls_pooled = SentenceTransformer(
        modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")]
    )
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_BACKEND=onnx"):
        OnnxTextEncoder(cls_pooled, tmp_path, batch_size=8, threads=1, spin=False)


def test_auto_runs_the_packaged_model_on_onnx(onnx_cache: Path, onnx_embedder: Embedder) -> None:
    auto = Embedder(EmbedderConfig(backend="auto", onnx_cache_dir=onnx_cache))
    assert auto.backend == "onnx"
    query = sample_queries(1)[0]
    assert float(auto.embed_query(query) @ onnx_embedder.embed_query(query)) > 0.9999


def test_auto_falls_back_to_torch_for_a_model_onnx_cannot_pool(tmp_path: Path) -> None:
    transformer = Transformer(resolve_model_path(""))
    cls_pooled = SentenceTransformer(
        modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")]
    )
    cls_pooled.save(str(tmp_path / "cls-model"))
    config = EmbedderConfig(model=str(tmp_path / "cls-model"), onnx_cache_dir=tmp_path / "cache")
    assert Embedder(config).backend == "torch"
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_BACKEND=onnx supports"):
        Embedder(dataclasses.replace(config, backend="onnx"))


@pytest.mark.unit
def test_groups_hold_rows_of_similar_length() -> None:
    lengths = np.array([10, 40, 12, 39, 31, 9, 40])
    groups = similar_length_groups(lengths, max_rows=2, min_ratio=0.75)
    assert [g.tolist() for g in groups] == [[1, 6], [3, 4], [2, 0], [5]]
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (EmbedderConfig(backend="onnx", device="cuda", onnx_cache_dir=Path("/tmp")), "CPU only"),
        (EmbedderConfig(backend="onnx"), "needs a cache directory"),
    ],
)
def test_an_impossible_onnx_configuration_is_refused_before_loading(
    config: EmbedderConfig, reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        Embedder(config)
