"""Cross-encoder scoring core (no gRPC): load any sentence-transformers
CrossEncoder, warm it up, and score (query, passage) pairs in batches that stop
*before* the one that would overrun the caller's deadline.

One model instance serves every request, from one thread: concurrent calls
share its forward passes, a batch holding the next pairs of several calls
(`services.reranker.batching`), each call answered by its own deadline with
what was scored in time. Time spent waiting for the model counts against
each request's own deadline. With the ONNX backends a batch is also
abandoned once every call in it is past its deadline (`BatchInterrupted`); a
torch forward pass cannot be, but its callers are answered at their
deadlines all the same.

What happens is reported to an optional `ScoringObserver` (the app's
Prometheus metrics, `services.reranker.metrics`); without one, nothing is.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from services.core.environment import default_data_dir
from services.core.errors import ConfigError, InvalidArgument, Unavailable
from services.core.logging import get_logger
from services.core.query_text import EMPTY_QUERY, is_empty_query, shows_nothing
from services.embedding.packaged_files import packaged_reranker, verified_folder
from services.embedding.packaged_models import PREFIX
from services.reranker.backends import ScoringBackend, TorchBackend
from services.reranker.batch_cost import BatchPlanner
from services.reranker.batching import (
    BatchScheduler,
    NoObserver,
    SchedulerStats,
    ScoringObserver,
)
from services.reranker.colbert_backend import PackagedColbertBackend
from services.reranker.jobs import ScoreResult
from services.reranker.onnx_backend import OnnxBackend
from services.reranker.packaged_backend import PackagedCrossEncoderBackend
from services.reranker.settings import DEFAULT_MODEL, Activation, Backend

if TYPE_CHECKING:  # imported when a sentence-transformers model is loaded: the
    # packaged ONNX model serves without torch (seconds of start-up)
    from sentence_transformers import CrossEncoder

# Info's reason while the model loads: not a failure, the answer to wait for.
LOADING = "loading"
log = get_logger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_WARM_UP_SENTENCE = (
    "Hybrid retrieval fuses lexical and vector rankings before a cross-encoder "
    "rescores the most promising passages within the caller's time budget. "
)


class ModelLoadError(Unavailable):
    """The model cannot be loaded; the message says why."""


@dataclass(frozen=True)
class InputLimits:
    """Request hygiene: bounded passage count, over-long text truncated (never
    rejected), empty input rejected. `max_passage_chars` caps the query too."""

    max_passages: int = 64
    max_passage_chars: int = 2000

    def clean(self, query: str, passages: Sequence[str]) -> tuple[str, list[str]]:
        if is_empty_query(query):  # the same definition as the gateway's and the Retriever's
            raise InvalidArgument(EMPTY_QUERY)
        query = query.strip()
        if not passages:
            raise InvalidArgument("passages: empty; give at least one passage to score")
        if len(passages) > self.max_passages:
            raise InvalidArgument(
                f"passages: {len(passages)} given; at most {self.max_passages} per request"
            )
        # A blank passage scored about as high as a relevant one (7.2 against
        # 8.3 with the packaged model): refused like a blank question.
        blank = next((i for i, passage in enumerate(passages) if shows_nothing(passage)), None)
        if blank is not None:
            raise InvalidArgument(f"passages[{blank}]: shows nothing; every passage needs text")
        cap = self.max_passage_chars
        return query[:cap], [passage[:cap] for passage in passages]


def hub_offline() -> bool:
    """No hub is reachable on these machines: a hub name must fail at once, not
    retry for minutes. Offline is the default unless the operator turns it off."""
    return os.environ.setdefault("HF_HUB_OFFLINE", "1").strip().lower() in _TRUE


def _looks_like_path(model: str) -> bool:
    # Hub names are "name" or "org/name"; anything else is meant as a directory.
    return model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model


class CrossEncoderScorer:
    """Scores (query, passage) pairs with any sentence-transformers CrossEncoder."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        backend: Backend = "torch",
        max_length: int = 256,
        batch_size: int = 8,
        device: str = "cpu",
        activation: Activation = "none",
        threads: int = 0,
        onnx_spin: bool = False,
        cache_dir: Path | None = None,
        model_cache: Path | None = None,
        planner: BatchPlanner | None = None,
        observer: ScoringObserver | None = None,
        max_requests: int = 64,
    ) -> None:
        """`max_requests`: calls whose pairs may share the model's batches at
        once (`services.reranker.batching`). `model_cache`: where the packaged
        models' files are (default: services.embedding.packaged_files)."""
        self.model = model
        self.backend = backend
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.activation = activation
        self.threads = threads
        self.onnx_spin = onnx_spin
        self.cache_dir = cache_dir or default_data_dir() / "reranker"
        self.model_cache = model_cache
        self.planner = planner or BatchPlanner(max_length, batch_size)
        self._backend: ScoringBackend | None = None
        self._reason = "not loaded yet"
        self._observer: ScoringObserver = observer or NoObserver()
        # Held around every forward pass: the warm-up's and the scheduler's.
        self._model_lock = threading.Lock()
        self._scheduler = BatchScheduler(
            self._score_pairs,
            self.planner,
            self._model_lock,
            max_requests=max_requests,
            observer=self._observer,
        )

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    @property
    def reason(self) -> str:
        """Why the model is not serving ("" once loaded)."""
        return self._reason

    def load(self) -> None:
        """Load the model and prepare the backend; ModelLoadError says why not."""
        self._reason = LOADING
        started = time.perf_counter()
        try:
            if self.model.startswith(PREFIX):
                self._backend = self._packaged_backend()
            else:
                cross_encoder = self._load_cross_encoder()
                self._check_max_length(cross_encoder)
                self._backend = self._make_backend(cross_encoder)
        except ModelLoadError as exc:
            self._reason = str(exc)
            raise
        except ConfigError as exc:  # a packaged model's files missing or altered
            self._reason = str(exc)
            raise ModelLoadError(self._reason) from exc
        except Exception as exc:
            self._reason = (
                f"cannot load {self.model!r} ({self.backend}): {type(exc).__name__}: {exc}"
            )
            raise ModelLoadError(self._reason) from exc
        self._reason = ""
        log.info(
            "rerank_model_loaded",
            model=self.model,
            backend=self.backend,
            load_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def _packaged_backend(self) -> ScoringBackend:
        """A packaged model (services.embedding.packaged_files): its own int8 ONNX
        graph and tokenizer, files checked against their pinned digests."""
        if self.backend != "onnx-int8":
            raise ModelLoadError(
                f"{self.model} ships as an int8 ONNX graph: use RAG_RERANK_BACKEND=onnx-int8"
            )
        late = packaged_reranker(self.model).kind == "late-interaction"
        backend_type = PackagedColbertBackend if late else PackagedCrossEncoderBackend
        backend: PackagedColbertBackend | PackagedCrossEncoderBackend = backend_type(
            verified_folder(self.model, self.model_cache),
            self.max_length,
            self.threads,
            self.onnx_spin,
        )
        if self.max_length > backend.positions:
            raise ModelLoadError(
                f"max_length {self.max_length} exceeds the {backend.positions} positions of "
                f"{self.model!r}"
            )
        return backend

    def _load_cross_encoder(self) -> CrossEncoder:
        from sentence_transformers import CrossEncoder

        offline = hub_offline()
        source, is_local = self._resolve_source()
        try:
            return CrossEncoder(
                source,
                device=self.device,
                max_length=self.max_length,
                local_files_only=offline or is_local,
            )
        except OSError as exc:
            if offline and not is_local:
                raise ModelLoadError(
                    f"model {self.model!r} is not a local directory and is not in the "
                    "Hugging Face cache; hub access is off (HF_HUB_OFFLINE=1): download it "
                    "once where the hub is reachable, or configure a local directory"
                ) from exc
            raise

    def _resolve_source(self) -> tuple[str, bool]:
        path = Path(self.model).expanduser()
        if path.is_dir():
            return str(path), True
        if path.exists():
            raise ModelLoadError(f"model path {path} is not a directory")
        if _looks_like_path(self.model):
            raise ModelLoadError(f"model path {path} does not exist")
        return self.model, False

    def _check_max_length(self, cross_encoder: CrossEncoder) -> None:
        config = getattr(cross_encoder.model, "config", None)
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and self.max_length > positions:
            raise ModelLoadError(
                f"max_length {self.max_length} exceeds the {positions} positions of {self.model!r}"
            )

    def _make_backend(self, cross_encoder: CrossEncoder) -> ScoringBackend:
        if self.backend == "torch":
            if self.threads > 0:
                import torch

                torch.set_num_threads(self.threads)  # process-wide: one model per process
            return TorchBackend(cross_encoder)
        return OnnxBackend(
            cross_encoder,
            self.cache_dir,
            quantize=self.backend == "onnx-int8",
            threads=self.threads,
            spin=self.onnx_spin,
        )

    def warm_up(self) -> None:
        """Run the backend once cold, then calibrate the batch cost model with a
        minimal call (the fixed overhead) and a full batch of max-length pairs."""
        backend = self._require_backend()
        long_passage = _WARM_UP_SENTENCE * math.ceil(6 * self.max_length / len(_WARM_UP_SENTENCE))
        tiny = [("warm-up", "ok")]
        full = [("warm-up query", long_passage)] * self.batch_size
        with self._model_lock:
            overhead_ms = min(self._timed(backend, tiny) for _ in range(3))
            full_ms = min(self._timed(backend, full) for _ in range(2))
        tokens = self.planner.tokens.padded_batch_tokens(full[0][0], [long_passage] * len(full))
        self.planner.cost.calibrate(overhead_ms, tokens, full_ms)
        self._observer.model_ready(True)
        log.info(
            "rerank_warmed_up",
            overhead_ms=round(overhead_ms, 2),
            full_batch_ms=round(full_ms, 1),
            batch_size=self.batch_size,
            ms_per_pair=round(full_ms / self.batch_size, 2),
        )

    @staticmethod
    def _timed(backend: ScoringBackend, pairs: Sequence[tuple[str, str]]) -> float:
        started = time.perf_counter()
        backend.logits(pairs)
        return (time.perf_counter() - started) * 1000

    def score(
        self, query: str, passages: Sequence[str], deadline: float | None = None
    ) -> ScoreResult:
        """Score passages in input order (blocking). `deadline` is a
        time.monotonic() value; by then at the latest, return what is scored
        so far, marked partial. Concurrent calls share model batches."""
        self._require_backend()
        return self._scheduler.wait(self._scheduler.submit(query, passages, deadline))

    async def score_async(
        self, query: str, passages: Sequence[str], deadline: float | None = None
    ) -> ScoreResult:
        """`score` for the event loop: no thread waits while the model works."""
        self._require_backend()
        return await self._scheduler.wait_async(self._scheduler.submit(query, passages, deadline))

    def scheduling(self) -> SchedulerStats:
        """What the shared batches did so far (tests, benchmarks)."""
        return self._scheduler.stats()

    def close(self) -> None:
        """Stop taking calls; calls still waiting are answered unavailable."""
        self._scheduler.close()

    def _score_pairs(self, pairs: Sequence[tuple[str, str]], deadline: float | None) -> list[float]:
        """One model batch, from the scheduler's thread (model lock held)."""
        return self._activate(self._require_backend().logits(pairs, deadline))

    def _activate(self, logits: np.ndarray) -> list[float]:
        # Multi-label heads: the last label is the "relevant" class by convention.
        column = np.asarray(logits, dtype=np.float64).reshape(len(logits), -1)[:, -1]
        if self.activation == "sigmoid":
            column = 1.0 / (1.0 + np.exp(-column))
        return [float(value) for value in column]

    def _require_backend(self) -> ScoringBackend:
        if self._backend is None:
            raise Unavailable(f"reranker model not loaded: {self._reason}")
        return self._backend

    def describe(self) -> dict[str, Any]:
        """What runs, for logs and the Info RPC."""
        return {
            "model": self.model,
            "backend": self.backend,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "device": self.device,
            "activation": self.activation,
        }
