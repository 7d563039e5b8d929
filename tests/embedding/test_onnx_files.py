"""Dynamic int8 quantisation of an ONNX graph (services/embedding/onnx_files.py)
on a real, tiny graph: it never writes beside the model it reads, so builds
sharing a model cache cannot trip over each other's side files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from services.embedding.onnx_files import open_session, quantize_int8

pytestmark = pytest.mark.unit


def _matmul_model(path: Path) -> None:
    weights = np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        initializer=[numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_quantising_writes_nothing_beside_the_model(tmp_path: Path) -> None:
    """The quantiser's shape-inferred copy (`model.fp32-inferred.onnx`) used
    to be written beside the model and deleted after: two builds of one cache
    at once overwrote and deleted each other's, and one failed with "Failed to
    find proper ai.onnx domain" (a fresh clone's `make test`, 2026-12-06).
    Here that name is taken by a folder, which fails any such write."""
    cache = tmp_path / "cache"
    cache.mkdir()
    fp32 = cache / "model.fp32.onnx"
    _matmul_model(fp32)
    (cache / "model.fp32-inferred.onnx").mkdir()
    int8 = cache / "model.int8.onnx"
    quantize_int8(fp32, int8)
    assert sorted(p.name for p in cache.iterdir()) == [
        "model.fp32-inferred.onnx",
        "model.fp32.onnx",
        "model.int8.onnx",
    ]
    ops = {node.op_type for node in onnx.load(str(int8)).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeLinear" in ops
    x = np.ones((1, 64), dtype=np.float32)
    exact = open_session(fp32, 1, False).run(None, {"x": x})[0]
    quantised = open_session(int8, 1, False).run(None, {"x": x})[0]
    assert np.allclose(exact, quantised, atol=0.2 * np.abs(exact).max())
