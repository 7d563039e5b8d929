"""What RAG_EMBEDDING_DOCUMENT_PRECISION=auto (the default) means on this
machine: int8 documents where the CPU multiplies int8 by int8 in hardware,
fp32 elsewhere.

Dynamic int8 quantisation pays where ONNX Runtime's int8 matrix products run
on integer dot-product instructions (x86 VNNI or AMX, Arm's dot product).
Measured with `python -m bench.load.document_encoder` on 2 cores
(docs/benchmarks.md, "Ingest throughput with the multilingual default"):
multilingual-e5-small int8 at 1.66x the fp32 chunks/s on an Intel Xeon with
AVX-512 VNNI and AMX, 1.21x on an AMD EPYC without VNNI, where int8 runs on
the same AVX2 units as fp32 and its 0.0025 SciFact nDCG@10 would buy little.
Queries are encoded in fp32 unless RAG_EMBEDDING_QUERY_PRECISION=int8; the
index records its document encoder, and a switch between machines is allowed
(same weights: vectors at cosine ~0.997 to fp32) and logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services.embedding.config import MULTILINGUAL_MODEL, PACKAGED_MODEL, Precision

DocumentPrecisionSetting = Literal["auto", "fp32", "int8"]
# Flags of /proc/cpuinfo naming int8 dot-product instructions, best first.
INT8_DOT_PRODUCT_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "asimddp")
# The models whose int8 document encoder was measured (speed and quality);
# another model gets int8 only when asked for.
MEASURED_INT8_MODELS = frozenset({MULTILINGUAL_MODEL, PACKAGED_MODEL})
CPU_INFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class PrecisionChoice:
    precision: Precision
    reason: str  # for the start-up log


def int8_dot_product(cpu_info: Path = CPU_INFO) -> str:
    """The first of INT8_DOT_PRODUCT_FLAGS this CPU has ("": none, or no
    /proc/cpuinfo to read: then assume none)."""
    try:
        text = cpu_info.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86, Arm
            found = set(value.split())
            return next((flag for flag in INT8_DOT_PRODUCT_FLAGS if flag in found), "")
    return ""


def choose_document_precision(
    setting: DocumentPrecisionSetting, model: str, backend: str, cpu_flag: str
) -> PrecisionChoice:
    """The precision the Indexer encodes documents in, and why."""
    if setting != "auto":
        return PrecisionChoice(setting, "set by RAG_EMBEDDING_DOCUMENT_PRECISION")
    if backend == "torch":
        return PrecisionChoice("fp32", "the torch backend has no int8 path")
    if model not in MEASURED_INT8_MODELS:
        return PrecisionChoice("fp32", f"int8 documents are not measured for {model}")
    if not cpu_flag:
        return PrecisionChoice(
            "fp32", "no int8 dot-product instructions on this CPU (int8 measured 1.21x only)"
        )
    return PrecisionChoice("int8", f"this CPU has {cpu_flag} (int8 measured 1.66x fp32)")
