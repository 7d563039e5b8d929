"""Cross-encoder scoring core (no gRPC): load any sentence-transformers
CrossEncoder, warm it up, and score (query, passage) pairs in batches that stop
*before* the one that would overrun the caller's deadline.

One model instance serves every request. Model calls are serialized, batch by
batch in arrival order (`FifoLock`), not request by request: one forward pass
already uses every core, Hugging Face fast tokenizers are not safe for
concurrent calls, and interleaving batches keeps a short request from waiting
behind a long one. Time spent waiting for the model counts against each
request's own deadline. With the ONNX backends a batch is also abandoned at
the deadline itself (`BatchInterrupted`); a torch forward pass cannot be.

What happens is reported to an optional `ScoringObserver` (the app's
Prometheus metrics, `services.reranker.metrics`); without one, nothing is.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from sentence_transformers import CrossEncoder

from services.common.errors import InvalidArgument, Unavailable
from services.common.logging import get_logger
from services.common.query_text import EMPTY_QUERY, is_empty_query
from services.common.settings import default_data_dir
from services.reranker.backends import BatchInterrupted, ScoringBackend, TorchBackend
from services.reranker.batch_cost import BatchPlanner
from services.reranker.fifo_lock import FifoLock
from services.reranker.onnx_backend import OnnxBackend
from services.reranker.settings import DEFAULT_MODEL, Activation, Backend

log = get_logger(__name__)

# Why a call scored fewer passages than it was given (`ScoreResult.stop_reason`).
# deadline: the time left could not fit the next batch (or a batch was
# interrupted at the deadline); queue_timeout: the deadline passed while the
# call waited for the model, held by other calls' batches (saturation).
STOP_DEADLINE = "deadline"
STOP_QUEUE_TIMEOUT = "queue_timeout"
_TRUE = {"1", "true", "yes", "on"}
_WARM_UP_SENTENCE = (
    "Hybrid retrieval fuses lexical and vector rankings before a cross-encoder "
    "rescores the most promising passages within the caller's time budget. "
)


@dataclass(frozen=True)
class ScoreResult:
    """Scores in input order; when partial, only passages[0:scored] were scored."""

    scores: list[float]
    scored: int
    partial: bool
    stop_reason: str
    elapsed_ms: float


class ScoringObserver(Protocol):
    """Told what scoring does, from the scoring threads (so: thread-safe)."""

    def batch_scored(self, pairs: int) -> None:
        """A model batch of `pairs` pairs completed."""

    def queue_waited(self, seconds: float) -> None:
        """A call waited this long for the model before its first batch (or gave up)."""

    def stopped_early(self, stop_reason: str) -> None:
        """A call returned fewer scores than passages, for this reason."""

    def model_ready(self, ready: bool) -> None:
        """The model is (or is no longer) loaded and warmed up."""


class _NoObserver:
    def batch_scored(self, pairs: int) -> None:
        pass

    def queue_waited(self, seconds: float) -> None:
        pass

    def stopped_early(self, stop_reason: str) -> None:
        pass

    def model_ready(self, ready: bool) -> None:
        pass


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
            raise InvalidArgument("no passages to score")
        if len(passages) > self.max_passages:
            raise InvalidArgument(
                f"{len(passages)} passages; at most {self.max_passages} per request"
            )
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
        planner: BatchPlanner | None = None,
        observer: ScoringObserver | None = None,
    ) -> None:
        self.model = model
        self.backend = backend
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.activation = activation
        self.threads = threads
        self.onnx_spin = onnx_spin
        self.cache_dir = cache_dir or default_data_dir() / "reranker"
        self.planner = planner or BatchPlanner(max_length, batch_size)
        self._backend: ScoringBackend | None = None
        self._reason = "not loaded yet"
        self._model_lock = FifoLock()
        self._observer: ScoringObserver = observer or _NoObserver()

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    @property
    def reason(self) -> str:
        """Why the model is not serving ("" once loaded)."""
        return self._reason

    def load(self) -> None:
        """Load the model and prepare the backend; ModelLoadError says why not."""
        self._reason = "loading"
        started = time.perf_counter()
        try:
            cross_encoder = self._load_cross_encoder()
            self._check_max_length(cross_encoder)
            self._backend = self._make_backend(cross_encoder)
        except ModelLoadError as exc:
            self._reason = str(exc)
            raise
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

    def _load_cross_encoder(self) -> CrossEncoder:
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
        """Score passages in input order. `deadline` is a time.monotonic() value;
        when the next batch would not finish by then, stop and return what is
        scored so far, marked partial."""
        backend = self._require_backend()
        started = time.monotonic()
        scores: list[float] = []
        stop_reason = ""
        while len(scores) < len(passages):
            # The planner looks at one batch ahead at most.
            pending = passages[len(scores) : len(scores) + self.batch_size]
            batch, stop_reason = self._score_next_batch(
                backend, query, pending, deadline, first=not scores
            )
            if stop_reason:
                break
            scores.extend(batch)
        if stop_reason:
            self._observer.stopped_early(stop_reason)
        return ScoreResult(
            scores=scores,
            scored=len(scores),
            partial=bool(stop_reason),
            stop_reason=stop_reason,
            elapsed_ms=(time.monotonic() - started) * 1000,
        )

    def _score_next_batch(
        self,
        backend: ScoringBackend,
        query: str,
        pending: Sequence[str],
        deadline: float | None,
        *,
        first: bool,
    ) -> tuple[list[float], str]:
        """The next batch's scores and "", or no scores and why not."""
        refused = self._acquire_model(deadline, first=first)
        if refused:
            return [], refused
        try:
            size = self.planner.next_batch_size(query, pending, _remaining_ms(deadline))
            if size == 0:
                return [], STOP_DEADLINE
            batch = pending[:size]
            started = time.perf_counter()
            logits = backend.logits([(query, passage) for passage in batch], deadline)
            self.planner.observe(query, batch, (time.perf_counter() - started) * 1000)
        except BatchInterrupted:
            return [], STOP_DEADLINE
        finally:
            self._model_lock.release()
        self._observer.batch_scored(size)
        return self._activate(logits), ""

    def _acquire_model(self, deadline: float | None, *, first: bool) -> str:
        """Wait for the model: "" once held, else why not. The wait before a
        call's first batch is what queueing behind other calls costs it, so
        that one is reported (granted or not); later waits are interleaving."""
        timeout = None if deadline is None else deadline - time.monotonic()
        if timeout is not None and timeout <= 0:
            return STOP_DEADLINE  # out of time before asking: not a queueing problem
        started = time.perf_counter()
        acquired = self._model_lock.acquire(timeout=timeout)
        if first:
            self._observer.queue_waited(time.perf_counter() - started)
        return "" if acquired else STOP_QUEUE_TIMEOUT

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


def _remaining_ms(deadline: float | None) -> float | None:
    return None if deadline is None else (deadline - time.monotonic()) * 1000
