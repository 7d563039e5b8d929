"""docs/benchmarks.md: the default channel weights, fitted on three train
splits at once (bench.eval.channel_weight_fit)."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "channel-weight-fit.json"
KNOWN_ITEM_FILE = "known-item.json"
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
        f"(RAG_QUESTION_VECTOR_WEIGHT / RAG_LEXICAL_WEIGHT), the best {fit['objective']} "
        f"among points that lose no set more than {fit['tolerance']} and keep the identifiers' "
        f"exact@1 (mean gains within {fit.get('noise', 0)} of the best count as equal, the "
        "train splits being small; of those, the current default if it is one, else the "
        "point nearest equal weights)."
        if chosen
        else f"Not chosen: sets missing ({', '.join(fit['missing'])})."
    )
    return (
        "### Channel weights: fitted on three train splits\n\n"
        + provenance(fit)
        + "\nEach point runs every set's own harness on its train questions through "
        "`Retrieve` (hybrid, reranking off). Under RRF only the ratio of the two weights "
        f"matters, so the lexical weight stays 1. {verdict} The test splits were not read; "
        "the figures of record are each set's own section. The fitted weight applies to "
        "queries that read as a question (RAG_QUESTION_VECTOR_WEIGHT); other queries keep "
        "RAG_VECTOR_WEIGHT, because it buries a page only the lexical channel finds for a "
        "few words typed from memory (the known-item section below; docs/retrieval.md, "
        "'Channel weights').\n\n" + table(header, body)
    )


def _get(figures: dict[str, Any], name: str, key: str, metric: str) -> float | None:
    value = figures.get(name, {}).get(key, {}).get(metric)
    return None if value is None else float(value)


def known_item_section(run: dict[str, Any]) -> str:
    """Known-item queries generated from the third-party index (bench.eval.known_item)."""
    figures = run["figures"]
    kinds = list(run["queries"])
    header = ("weights", *(f"{kind} hit@1 / MRR@10" for kind in kinds))
    body = [
        (label, *(_pair(fig["kinds"].get(kind, {})) for kind in kinds))
        for label, fig in figures.items()
    ]
    counts = ", ".join(f"{kind} {n}" for kind, n in run["queries"].items())
    examples = "; ".join(f"{kind}: `{text}`" for kind, text in run["examples"].items())
    return (
        "### Known-item queries: the veto set for channel weights\n\n"
        + provenance(run)
        + f"\nGenerated from the {run['pages']} indexed pages of the third-party index "
        f"(queries: {counts}; e.g. {examples}): `words-N` is one word found on at most two "
        "pages plus N-1 other content words of the page, no function words; `line` is eight "
        "consecutive words of a sentence of the page. Relevant: every page holding all the "
        "words (the line's text). Hybrid through `Retrieve`, reranking off; each weight set "
        "as the request's `weights` (lexical 1); 'server default' sends none, so the "
        "service's own rule applies (RAG_VECTOR_WEIGHT, or RAG_QUESTION_VECTOR_WEIGHT for a "
        "query that reads as a question: only `line` queries do).\n\n" + table(header, body)
    )


def _pair(scores: dict[str, Any]) -> str | None:
    if not scores:
        return None
    return f"{scores['hit@1']:.3f} / {scores['mrr@10']:.3f}"
