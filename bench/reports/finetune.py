"""The benchmark page's account of the embedding model fitted on the train
split (`bench.eval.finetune`): how it was made, how its own index was built and
how the recipe did on held-out train queries before it was used."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import table

HEADER = "### The embedding model fine-tuned on the train split\n"
MODELS = ("packaged", "fine-tuned")


def finetune_section(result: dict[str, Any]) -> str:
    finetuned = result.get("finetuned")
    if finetuned is None:
        return ""
    card = finetuned["card"]
    return "\n".join(
        [
            HEADER,
            f"`{card['command']}` ({card['date']}, revision `{card['git_revision']}`) trained "
            f"{card['base_model']} on {card['queries']} {card['split']} queries: "
            f"{card['pairs']} pairs {card['pair']}; {card['loss']}; {_recipe(card['recipe'])}; "
            f"{card['train_seconds']} s; weights sha256 `{card['weights_sha256_12']}…`. "
            f"Its vectors live in an index of their own ({_index(finetuned)}); the lexical "
            "channel and every other setting are the same as above. It is not the service "
            "default: a corpus-specific model is an operator's decision "
            "(`RAG_EMBEDDING_MODEL=<folder>`, then a re-index into a fresh data directory).\n",
            validation_note(finetuned.get("validation"), card["recipe"]),
        ]
    )


def _recipe(recipe: dict[str, Any]) -> str:
    return (
        f"{recipe['epochs']} epoch(s), batch {recipe['batch_size']}, learning rate "
        f"{recipe['learning_rate']:g}, similarity scale {recipe['scale']:g}, seed {recipe['seed']}"
    )


def _index(finetuned: dict[str, Any]) -> str:
    index = finetuned["index"]
    built = (
        "reused: every document unchanged"
        if index["reused"]
        else f"built by this run in {index['seconds']} s, {index.get('docs_per_s')} docs/s"
    )
    return f"{finetuned['chunking']['chunks']} chunks, {built}"


def validation_note(validation: dict[str, Any] | None, used: dict[str, Any]) -> str:
    """How each recipe did on train queries it was not fitted on."""
    runs = (validation or {}).get("runs") or []
    if not runs:
        return "The recipe has not been validated on held-out train queries (`--holdout`).\n"
    first = runs[0]
    rows = [
        (
            _recipe(run["card"]["recipe"]),
            *(run["scores"][m][c]["ndcg@10"] for c in ("vector", "hybrid") for m in MODELS),
            f"`{run['command']}`, {run['date'][:10]}",
            "used" if run["card"]["recipe"] == used else "",
        )
        for run in runs
    ]
    headers = ("recipe", "vector, packaged", "vector, fine-tuned", "hybrid, packaged")
    return (
        f"Recipes were compared with `--holdout`: fitted on {first['fitted_queries']} train "
        f"queries, scored through Retrieve on the other {first['held_out_queries']} (nDCG@10; "
        "the test split played no part):\n\n"
        + table((*headers, "hybrid, fine-tuned", "command", ""), rows)
    )
