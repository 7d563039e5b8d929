"""The section of `python -m bench.load.scope_speed`: Retrieve against the
query embedding on one-locale and multi-scope indexes, two revisions."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table
from bench.reports.targets import RETRIEVE_P50_RATIO, THROUGHPUT_SHARE

RESULTS_FILE = "scope_speed.json"
HEADERS = (
    "shape",
    "revision",
    "c=1 p50 ms",
    "embedding p50 ms",
    "p50 / embedding",
    "c=16 req/s",
    "bound q/s",
    "c=16 / bound",
    "rounds",
)
SHAPES = {
    "scifact": "SciFact alone, scoped to it",
    "english-scope": "the SciFact scope of an index that also holds a bilingual scope",
    "bilingual-scope": "the bilingual (en / zh-CN) scope of that index, the bilingual questions",
}
P50_TARGET, SHARE_TARGET = RETRIEVE_P50_RATIO.threshold, THROUGHPUT_SHARE.threshold


def scope_speed_section(result: dict[str, Any]) -> str:
    rows = [
        (
            row["shape"],
            _revision(result, row["revision"]),
            f"{row['c1_p50_ms']:.1f}",
            f"{row['embedding_p50_ms']:.1f}",
            f"{row['c1_p50_ratio']:.2f}",
            f"{row['c16_rps']:.1f}",
            f"{row['bound_qps']:.1f}",
            f"{row['c16_share']:.2f}",
            row["rounds"],
        )
        for row in result["summary"]
    ]
    index = result["index"]
    return "\n".join(
        [
            "## Speed: Retrieve by scope, one-locale and multi-scope indexes\n",
            provenance(result),
            f"Index shapes: {'; '.join(f'`{k}`: {v}' for k, v in SHAPES.items())}. "
            f"SciFact sample {index['single']['documents']} documents "
            f"({index['single']['chunks']} chunks); with the bilingual pages "
            f"{index['multi']['documents']} documents ({index['multi']['chunks']} chunks). "
            "No reranking, query cache off. Each round measures the query embedding alone "
            "(one query at a time, in the load client's process), then both revisions in "
            "alternating order; the ratios are per round, their median is shown. The machine "
            "is shared with other engineers' runs: compare ratios within this table, not "
            "absolute times with other sections.\n",
            table(HEADERS, rows),
            _targets(result),
        ]
    )


def _revision(result: dict[str, Any], name: str) -> str:
    described = result.get(name, {})
    commit = str(described.get("commit", ""))[:7]
    return f"{name} `{commit}`" if commit else name


def _targets(result: dict[str, Any]) -> str:
    """The issue's targets, for the measured revision ("this")."""
    rows = []
    for row in result["summary"]:
        if row["revision"] != "this":
            continue
        rows.append(
            (
                row["shape"],
                f"p50 / embedding ≤ {P50_TARGET}",
                f"{row['c1_p50_ratio']:.2f}",
                "met" if row["c1_p50_ratio"] <= P50_TARGET else "missed",
            )
        )
        rows.append(
            (
                row["shape"],
                f"c=16 / bound ≥ {SHARE_TARGET}",
                f"{row['c16_share']:.2f}",
                "met" if row["c16_share"] >= SHARE_TARGET else "missed",
            )
        )
    return "### Targets (measured revision)\n\n" + table(
        ("shape", "target", "measured", "verdict"), rows
    )
