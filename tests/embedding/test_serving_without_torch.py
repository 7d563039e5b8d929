"""The packaged models serve without PyTorch: once the e5 graphs are built,
the default embedding model and the packaged cross-encoder load, encode and
score in a process that never imports torch or sentence-transformers (whose
import took 10-40 s of every start-up on a loaded 2-core machine). Checked in
a fresh interpreter, as a service starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.embedding.embedder import Embedder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SERVE = """
import json, sys
from pathlib import Path
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.reranker.scorer import CrossEncoderScorer

embedder = Embedder(EmbedderConfig(
    model="packaged:multilingual-e5-small", onnx_cache_dir=Path(sys.argv[1])))
vector = embedder.embed_query("how do I rotate the API key")
scorer = CrossEncoderScorer(backend="onnx-int8", max_length=128)
scorer.load()
scores = scorer.score("capital of France", ["Paris is the capital of France.", "Bananas."]).scores
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print(json.dumps({"dim": len(vector), "scores": list(scores), "heavy": heavy}))
"""


def test_the_packaged_models_serve_without_torch(e5_embedder: Embedder, e5_cache_dir: Path) -> None:
    # e5_embedder: the graphs are built (a build needs torch; serving must not)
    result = subprocess.run(
        [sys.executable, "-c", SERVE, str(e5_cache_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["dim"] == 384
    relevant, irrelevant = served["scores"]
    assert relevant > irrelevant
    assert served["heavy"] == []


FIRST_START = """
import json, os, sys
from pathlib import Path
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder

embedder = Embedder(EmbedderConfig(
    model="packaged:multilingual-e5-small", onnx_cache_dir=Path(sys.argv[1])))
vector = embedder.embed_query("how do I rotate the API key")
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
built = sorted(p.name for p in Path(sys.argv[1]).glob("*/model.*.onnx"))
print(json.dumps({"dim": len(vector), "heavy": heavy, "built": built}))
"""


@pytest.mark.long(seconds=60)
def test_a_first_start_builds_the_graph_in_a_child_and_serves_without_torch(
    tmp_path: Path,
) -> None:
    """An empty model cache (a fresh data folder's first start): the export,
    which needs torch, runs in a child interpreter, so the serving process
    never holds torch's memory (bench/results/notes/first_start_build.md)."""
    result = subprocess.run(
        [sys.executable, "-c", FIRST_START, str(tmp_path / "empty-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served == {"dim": 384, "heavy": [], "built": ["model.fp32.onnx"]}
