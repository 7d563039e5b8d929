"""ONNX Runtime backend: the loaded cross-encoder, exported once, run by ORT.

The export (services.embedding.onnx_export) starts from the model already loaded
by sentence-transformers, so both backends share one tokenizer, one max length
and one activation; only the forward pass differs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from services.embedding.onnx_files import open_session
from services.reranker.backends import BatchInterrupted


class OnnxBackend:
    """Scores pairs with ONNX Runtime, tokenizing with the cross-encoder's own
    preprocessing so inputs match the torch path exactly."""

    def __init__(
        self,
        cross_encoder: Any,
        cache_dir: Path,
        quantize: bool = False,
        threads: int = 0,
        spin: bool = False,
    ) -> None:
        self.name = "onnx-int8" if quantize else "onnx"
        self._cross_encoder = cross_encoder
        model = cross_encoder.model
        if model is None or not type(model).__name__.endswith("ForSequenceClassification"):
            raise ValueError(
                f"the ONNX backend needs a sequence-classification cross-encoder, "
                f"got {type(model).__name__}"
            )
        # torch only here: the packaged reranker imports this module and serves without it
        from services.embedding.onnx_export import OnnxExporter, model_input_names

        sample = self._features([("warm-up query", "warm-up passage")])
        self._input_names = model_input_names(model, sample)
        inputs = {name: sample[name] for name in self._input_names}
        self.model_path = OnnxExporter(cache_dir).ensure(model, inputs, quantize)
        self._session = open_session(self.model_path, threads, spin)

    def _features(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return dict(self._cross_encoder.preprocess(list(pairs)))

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        features = self._features(pairs)
        feeds = {name: features[name].numpy().astype(np.int64) for name in self._input_names}
        return run_by_deadline(self._session, "logits", feeds, deadline)


def run_by_deadline(
    session: ort.InferenceSession,
    output: str,
    feeds: dict[str, np.ndarray],
    deadline: float | None,
) -> np.ndarray:
    """`session`'s `output` for `feeds`, as float32; a run the deadline
    (time.monotonic()) stopped between operators raises BatchInterrupted."""
    options = ort.RunOptions()
    watchdog = _terminate_at(options, deadline)
    with _RUNS_LOCK:
        _RUNS.add(options)
    try:
        outputs = session.run([output], feeds, options)
    except Exception as exc:
        if options.terminate:
            raise BatchInterrupted("deadline reached inside the batch") from exc
        raise
    finally:
        with _RUNS_LOCK:
            _RUNS.discard(options)
        if watchdog is not None:
            watchdog.cancel()
    return np.asarray(outputs[0], dtype=np.float32)


# The runs in progress, so that a process stopping during its warm-up need not
# wait for it: the warm-up thread must be joined at exit (ONNX Runtime aborts a
# process that exits with a run going), and at a large batch size it took 70 s
# to obey SIGTERM (probe).
_RUNS: set[ort.RunOptions] = set()
_RUNS_LOCK = threading.Lock()


def abandon_runs() -> int:
    """Stop every run in progress between two operators (each raises
    BatchInterrupted); how many there were."""
    with _RUNS_LOCK:
        for options in _RUNS:
            options.terminate = True
        return len(_RUNS)


def _terminate_at(options: ort.RunOptions, deadline: float | None) -> threading.Timer | None:
    """Make ORT abandon the run (between operators) once the deadline passes,
    so even a batch slowed down by a busy machine cannot overrun it."""
    if deadline is None:
        return None
    watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), _set_terminate, (options,))
    watchdog.daemon = True
    watchdog.start()
    return watchdog


def _set_terminate(options: ort.RunOptions) -> None:
    options.terminate = True
