"""RAG_EMBEDDING_DOCUMENT_PRECISION=auto: int8 documents only where the CPU
has int8 dot-product instructions, for the models whose int8 was measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.embedding.config import MULTILINGUAL_MODEL, PACKAGED_MODEL
from services.embedding.document_precision import choose_document_precision, int8_dot_product

pytestmark = pytest.mark.unit

XEON = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni amx_int8 avx_vnni\n"
EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd aes crc32 asimddp\n"


@pytest.mark.parametrize(
    ("cpu_info", "flag"), [(XEON, "amx_int8"), (EPYC, ""), (GRAVITON, "asimddp")]
)
def test_the_cpu_s_int8_dot_product_instructions_are_read(
    tmp_path: Path, cpu_info: str, flag: str
) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(cpu_info)
    assert int8_dot_product(path) == flag


def test_no_cpu_information_means_no_such_instructions(tmp_path: Path) -> None:
    assert int8_dot_product(tmp_path / "missing") == ""


@pytest.mark.parametrize("model", [MULTILINGUAL_MODEL, PACKAGED_MODEL])
def test_auto_is_int8_for_a_measured_model_on_a_cpu_with_vnni(model: str) -> None:
    choice = choose_document_precision("auto", model, "auto", "avx512_vnni")
    assert choice.precision == "int8"
    assert "avx512_vnni" in choice.reason


@pytest.mark.parametrize(
    ("model", "backend", "flag", "why"),
    [
        (MULTILINGUAL_MODEL, "auto", "", "no int8 dot-product instructions"),
        (MULTILINGUAL_MODEL, "torch", "avx512_vnni", "torch backend"),
        ("/models/my-sentence-transformer", "onnx", "avx512_vnni", "not measured"),
    ],
)
def test_auto_stays_fp32_elsewhere(model: str, backend: str, flag: str, why: str) -> None:
    choice = choose_document_precision("auto", model, backend, flag)
    assert choice.precision == "fp32"
    assert why in choice.reason


@pytest.mark.parametrize("setting", ["fp32", "int8"])
def test_an_explicit_setting_is_kept_whatever_the_cpu(setting: str) -> None:
    for flag in ("", "amx_int8"):
        choice = choose_document_precision(setting, MULTILINGUAL_MODEL, "onnx", flag)  # type: ignore[arg-type]
        assert choice.precision == setting
