"""docs/benchmarks.md: the default channel weights, fitted on three train
splits at once (bench.eval.channel_weight_fit)."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "channel-weight-fit.json"
SETS = ("scifact", "bilingual", "third_party")


def channel_weight_fit_section(fit: dict[str, Any]) -> str:
    figures = fit["figures"]
    header = (
        "vector weight (lexical 1)",
        "SciFact train nDCG@10",
        "bilingual train MRR@10",
        "bilingual train hit@1",
        "third-party train MRR@10",
        "third-party train hit@1",
        "mean gain",
        "vetoed by",
    )
    rows_by_weight = {row["vector_weight"]: row for row in fit.get("rows", [])}
    body = []
    for weight in fit["grid"]:
        key = f"{weight:g}"
        row = rows_by_weight.get(float(weight), {})
        body.append(
            (
                f"{weight:g}",
                _get(figures, "scifact", key, "ndcg@10"),
                _get(figures, "bilingual", key, "mrr@10"),
                _get(figures, "bilingual", key, "hit@1"),
                _get(figures, "third_party", key, "mrr@10"),
                _get(figures, "third_party", key, "hit@1"),
                f"{row['mean_gain']:+.4f}" if row else None,
                ", ".join(row.get("vetoes", [])) or ("none" if row else None),
            )
        )
    chosen = fit.get("chosen")
    verdict = (
        f"Chosen: **vector {chosen['vector_weight']:g}, lexical {chosen['lexical_weight']:g}** "
        f"(RAG_VECTOR_WEIGHT / RAG_LEXICAL_WEIGHT), the best {fit['objective']} among points "
        f"that lose no set more than {fit['tolerance']} and keep the identifiers' exact@1 "
        f"(mean gains within {fit.get('noise', 0)} of the best count as equal; of those, the "
        "point nearest equal weights: the train splits are small)."
        if chosen
        else f"Not chosen: sets missing ({', '.join(fit['missing'])})."
    )
    return (
        "### Channel weights: fitted on three train splits\n\n"
        + provenance(fit)
        + "\nEach point runs every set's own harness on its train questions through "
        "`Retrieve` (hybrid, reranking off). Under RRF only the ratio of the two weights "
        f"matters, so the lexical weight stays 1. {verdict} The test splits were not read; "
        "the figures of record are each set's own section. The fitted weight is not the "
        "default: it buries a page only the lexical channel finds for a rare word typed "
        "alone (docs/retrieval.md, 'Channel weights: fitted, not adopted').\n\n"
        + table(header, body)
    )


def _get(figures: dict[str, Any], name: str, key: str, metric: str) -> float | None:
    value = figures.get(name, {}).get(key, {}).get(metric)
    return None if value is None else float(value)
