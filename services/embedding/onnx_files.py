"""ONNX model files without PyTorch: their dynamic int8 quantisation and
opening a session. Kept apart from onnx_export (which needs torch to export)
so that serving a model already built (the packaged e5 graphs, the packaged
reranker) does not import torch: 2 s of start-up on a quiet core, over 10 s
on a loaded one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import onnxruntime as ort

# Run in a child process whose working directory is a throw-away folder:
# onnx shape inference may drop temporary files into the working directory.
_QUANTIZE_SCRIPT = (
    "import sys\n"
    "from onnxruntime.quantization import QuantType, quantize_dynamic\n"
    "quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8, per_channel=True)\n"
)


def quantize_int8(fp32: Path, path: Path) -> None:
    """Dynamic int8 with per-channel weight scales (lower score drift at the
    same speed), in a child process so no side file lands in our cwd.

    The quantiser writes a shape-inferred copy beside the model it reads
    (`<name>-inferred.onnx`) and deletes it after; two builds sharing a model
    cache (two test workers, two services starting at once) overwrote and
    deleted each other's copy and one failed ("Failed to find proper ai.onnx
    domain"). So it reads a private link (or copy) of the model in its own
    scratch folder."""
    with tempfile.TemporaryDirectory(prefix="rag-onnx-quantize-") as scratch:
        private = Path(scratch) / fp32.name
        try:
            os.link(fp32, private)  # instant on one filesystem
        except OSError:
            shutil.copyfile(fp32, private)
        result = subprocess.run(
            [sys.executable, "-c", _QUANTIZE_SCRIPT, str(private), str(Path(path).absolute())],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"int8 quantization of {fp32} failed: {result.stderr[-2000:]}")


def open_session(model_path: Path, threads: int, spin: bool) -> ort.InferenceSession:
    """A CPU session with full graph optimisation; `threads` 0 keeps ORT's default."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads > 0:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads sleep unless told to spin: on a few shared cores the
    # spinning starves the compute threads (reranker int8, 5 pairs, load
    # average ~4: 215 ms p50 spinning, 119 ms not); alone on a quiet machine
    # spinning saves the wake-ups (int8, 8 pairs: 73 ms spinning, 88 ms not).
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
