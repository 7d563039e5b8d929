"""The benchmark page's sections on diversity (MMR) and on the fusion
method's choice."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "diversity.json"
FUSION_FILE = "scifact-train.json"
FUSION_TEST_FILE = "scifact-fusion-test.json"  # marked "purpose": "fusion"
FUSION_CONFIGS = ("hybrid", "hybrid-min_max", "hybrid-dbsf")


def diversity_section(result: dict[str, Any]) -> str:
    rows = [
        (
            "off" if row["mmr_lambda"] == 0 else f"{row['mmr_lambda']:g}",
            row["ndcg@10"],
            row["distinct_documents_top10"],
            row["mean_pairwise_cosine_top10"],
            row["latency"]["p50_ms"],
        )
        for row in result["rows"]
    ]
    return (
        "## Diversity (MMR)\n\n"
        + provenance(result)
        + f"\n{result['dataset']} {result['split']} split, {result['queries']} queries through "
        f"`Retrieve` (hybrid, no reranker), top 10 chunks with up to "
        f"{result['chunks_per_document']} per document. nDCG@10 on the distinct documents of "
        "those 10; distinct documents among them; mean pairwise cosine of their texts embedded "
        "by all-MiniLM-L6-v2 (a second model, so the measure is not MMR's own objective).\n\n"
        + table(
            ("mmr_lambda", "nDCG@10", "distinct documents", "mean pairwise cosine", "p50 ms"),
            rows,
        )
    )


def fusion_section(train: dict[str, Any], test: dict[str, Any] | None) -> str:
    rows = []
    for name in FUSION_CONFIGS:
        if name not in train["configs"]:
            continue
        measured = test["configs"].get(name, {}) if test else {}
        rows.append(
            (
                name.removeprefix("hybrid-") if "-" in name else "rrf",
                train["configs"][name]["ndcg@10"],
                measured.get("ndcg@10", "not measured"),
                measured.get("recall@100", "not measured"),
            )
        )
    test_line = f"Test split: {provenance(test)}\n" if test else ""
    return (
        "## Fusion method, chosen on the train split\n\n"
        + f"Train split: {provenance(train)}\n{test_line}"
        + f"\n{train['dataset']}, hybrid without reranker, one chunk per document; the default "
        "(`RAG_FUSION`) is chosen on train ({} queries) and on the bilingual set (its section "
        "below), and reported on test ({} queries).\n\n".format(
            train["queries"], test["queries"] if test else "no"
        )
        + table(("fusion", "nDCG@10 train", "nDCG@10 test", "Recall@100 test"), rows)
    )
