"""ONNX Runtime backend: the loaded cross-encoder, exported once, run by ORT.

The export starts from the model already loaded by sentence-transformers, so
both backends share one tokenizer, one max length and one activation; only the
forward pass differs. Exports are cached under a fingerprint of the weights,
so a restart reuses them and a changed model never picks up a stale file.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic

from services.common.logging import get_logger
from services.reranker.backends import BatchInterrupted

log = get_logger(__name__)

OPSET = 17
# Bump when the export recipe changes, so old cache entries are not reused.
EXPORT_FORMAT = "2"
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class _LogitsOnly(torch.nn.Module):
    """Positional tensors in, logits out: the shape the tracing exporter needs."""

    def __init__(self, model: torch.nn.Module, input_names: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.input_names = list(input_names)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.input_names, inputs, strict=True))).logits  # type: ignore[no-any-return]


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A digest of the architecture and every weight: the ONNX cache key."""
    digest = hashlib.sha256(f"{EXPORT_FORMAT}|{OPSET}|{type(model).__name__}".encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}".encode())
        digest.update(
            tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        )
    return digest.hexdigest()[:24]


@contextlib.contextmanager
def _eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """Trace the plain attention math rather than the fused SDPA call: ORT
    fuses the plain pattern into its own Attention kernel at load time, the
    SDPA export stays unfused (measured, MiniLM-L6 int8, 5 pairs: 110 → 86 ms)."""
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = getattr(model, "set_attn_implementation", None)
    if previous in (None, "eager") or switch is None:
        yield
        return
    switch("eager")
    try:
        yield
    finally:
        switch(previous)


def _atomic_write(target: Path, write: Any) -> Path:
    """Write via a temporary sibling so a crash or a concurrent exporter never
    leaves a half-written model where the cache expects a whole one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


class OnnxExporter:
    """Exports a Hugging Face sequence-classification model to ONNX (fp32, and
    optionally dynamic int8) into `cache_dir`, reusing earlier exports."""

    def __init__(self, cache_dir: Path, opset: int = OPSET) -> None:
        self.cache_dir = Path(cache_dir)
        self.opset = opset

    def ensure(
        self, model: torch.nn.Module, sample: dict[str, torch.Tensor], quantize: bool
    ) -> Path:
        entry = self.cache_dir / weights_fingerprint(model)
        fp32 = entry / "model.onnx"
        if not fp32.exists():
            log.info("onnx_export", path=str(fp32))
            _atomic_write(fp32, lambda tmp: self._export(model, sample, tmp))
        if not quantize:
            return fp32
        int8 = entry / "model.int8.onnx"
        if not int8.exists():
            log.info("onnx_quantize", path=str(int8))
            _atomic_write(int8, lambda tmp: self._quantize(fp32, tmp))
        return int8

    def _export(self, model: torch.nn.Module, sample: dict[str, torch.Tensor], path: Path) -> None:
        names = list(sample)
        wrapper = _LogitsOnly(model, names).eval()
        dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in names}
        dynamic_axes["logits"] = {0: "batch"}
        # The tracing exporter warns about Python control flow on shapes; the
        # axes it concerns are declared dynamic above, so the warnings are noise.
        with torch.no_grad(), warnings.catch_warnings(), _eager_attention(model):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                tuple(sample[name] for name in names),
                str(path),
                input_names=names,
                output_names=["logits"],
                dynamic_axes=dynamic_axes,
                opset_version=self.opset,
                dynamo=False,
            )
        model.eval()  # the exporter restores the wrapper's mode; keep inference mode explicit

    @staticmethod
    def _quantize(fp32: Path, path: Path) -> None:
        # Per-channel weight scales keep the score drift lower at the same speed.
        quantize_dynamic(fp32, path, weight_type=QuantType.QInt8, per_channel=True)


def model_input_names(model: torch.nn.Module, features: dict[str, Any]) -> list[str]:
    """The tokenizer outputs the model's forward() accepts (RoBERTa-style models
    take no token_type_ids)."""
    accepted = inspect.signature(model.forward).parameters
    return [name for name in MODEL_INPUTS if name in features and name in accepted]


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
        sample = self._features([("warm-up query", "warm-up passage")])
        self._input_names = model_input_names(model, sample)
        inputs = {name: sample[name] for name in self._input_names}
        self.model_path = OnnxExporter(cache_dir).ensure(model, inputs, quantize)
        self._session = ort.InferenceSession(
            str(self.model_path),
            self._session_options(threads, spin),
            providers=["CPUExecutionProvider"],
        )

    @staticmethod
    def _session_options(threads: int, spin: bool) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads > 0:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle pool threads sleep unless told to spin: on a few shared cores the
        # spinning starves the compute threads (int8, 5 pairs, load average ~4:
        # 215 ms p50 spinning, 119 ms not); alone on a quiet machine spinning
        # saves the wake-ups (int8, 8 pairs: 73 ms spinning, 88 ms not).
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        return options

    def _features(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return dict(self._cross_encoder.preprocess(list(pairs)))

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        features = self._features(pairs)
        feeds = {name: features[name].numpy().astype(np.int64) for name in self._input_names}
        options = ort.RunOptions()
        watchdog = _terminate_at(options, deadline)
        try:
            outputs = self._session.run(["logits"], feeds, options)
        except Exception as exc:
            if options.terminate:
                raise BatchInterrupted("deadline reached inside the batch") from exc
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
        return np.asarray(outputs[0], dtype=np.float32)


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
