"""The benchmark page's section on the int8 document encoder's speed and
drift (`python -m bench.load.document_encoder`); its quality is the SciFact
section's "hybrid, int8 document encoder" row."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table
from bench.reports.targets import INT8_DOCUMENT_SPEEDUP

RESULTS_FILE = "document_encoder.json"
SPEEDUP_TARGET = INT8_DOCUMENT_SPEEDUP
HEADERS = (
    "document encoder",
    "chunks/s",
    "ms/chunk",
    "× onnx-fp32",
    "chunks/s per round",
    "load s (incl. export)",
    "cosine to onnx-fp32: min / p1 / mean",
)


def document_encoder_section(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Document encoding: int8 and fp32 (RAG_EMBEDDING_DOCUMENT_PRECISION)\n",
            provenance(result),
            _about(result),
            table(HEADERS, _rows(result)),
            "### Document encoder target\n",
            _targets(result["targets"]),
        ]
    )


def _rows(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    drift = result["drift_vs_onnx_fp32"]
    rows = []
    for label, row in result["results"].items():
        cosine = drift.get(label)
        rows.append(
            (
                label,
                f"{row['chunks_per_s']:.1f}",
                f"{row['ms_per_chunk']:.1f}",
                f"{row['speedup_vs_onnx_fp32']:.2f}×",
                " / ".join(f"{rate:.1f}" for rate in row["round_chunks_per_s"]),
                f"{result['load_s'][label]:.1f}",
                "—"
                if cosine is None
                else f"{cosine['min']:.4f} / {cosine['p1']:.4f} / {cosine['mean']:.4f}",
            )
        )
    return rows


def _about(result: dict[str, Any]) -> str:
    sample, config = result["sample"], result["config"]
    return (
        f"`Embedder.embed_documents`, the Indexer's call, on {sample['chunks']} chunks drawn "
        f"(seed {sample['seed']}) from the {sample['corpus_chunks']} that the Indexer makes of "
        f"{result['dataset']}'s {sample['documents']} documents for `make eval` (title as "
        f"heading; {sample['chars_mean']:.0f} characters on average, at most "
        f"{sample['chars_max']}). Each encoder is an Embedder built from the Indexer's settings "
        f"(batch {config['batch_size']}, passes of at most {config['document_pass_chars']} "
        f"characters, {config['threads']}, OMP_WAIT_POLICY={config['omp_wait_policy'] or 'unset'}"
        f"); int8 is {config['int8']}. {config['rounds']} round(s), the encoders' order rotating "
        "from round to round; chunks/s is over all rounds, the speed-up divides total times. "
        "Queries are always encoded in fp32, so only documents drift; what the drift costs in "
        "ranking is the SciFact section's `hybrid, int8 document encoder` row. 1-minute load "
        f"average after the run {result['load_average_1m_after']}.\n"
    )


def _targets(targets: list[dict[str, Any]]) -> str:
    """As markdown.targets_table, the ratio with two decimals."""
    rows = [
        (
            t["what"],
            f"≥ {t['threshold']:g}{t['unit']} fp32 chunks/s",
            "—" if t["measured"] is None else f"{t['measured']:.2f}{t['unit']}",
            t["verdict"],
            t.get("note", ""),
        )
        for t in targets
    ]
    return table(("target", "threshold", "measured", "verdict", "note"), rows)
