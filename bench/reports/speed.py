"""The speed section (`python -m bench.load.speed`, `make bench`): Retrieve
latency and throughput per level, rerank outcome shares per level, the
model-bound reference points, reranking under deadlines, memory and where the
time goes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.reports.ingest_isolation import isolation_section_of
from bench.reports.markdown import provenance, table, targets_table
from bench.reports.targets import isolation_targets, speed_targets


def speed_section(bench: dict[str, Any], results_dir: Path, docs_path: Path) -> str:
    parts = [
        f"## Speed: Retrieve on {bench['dataset']} ({bench['index']['documents']} documents, "
        f"{bench['index']['chunks']} chunks)\n",
        provenance(bench),
        retrieve_table(bench),
    ]
    if bench.get("plot"):
        plot = os.path.relpath(results_dir / bench["plot"], docs_path.parent)
        parts.append(f"![Retrieve latency distributions]({plot})\n")
    parts += [
        rerank_shares_section(bench),
        model_section(bench),
        deadline_section(bench),
        memory_section(bench),
        profile_section(bench),
        isolation_section_of(bench, results_dir),
        "### Speed targets\n",
        targets_table(_targets(bench)),
    ]
    return "\n".join(p for p in parts if p)


def _targets(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Assessed when the page is written, so the page follows docs/targets.md."""
    isolation = bench.get("ingest_isolation")
    return speed_targets(bench) + (isolation_targets(isolation) if isolation else [])


def retrieve_table(bench: dict[str, Any]) -> str:
    rows = [
        (
            r["mode"],
            r["concurrency"],
            r["latency"]["n"],
            r["latency"]["p50_ms"],
            r["latency"]["p95_ms"],
            r["latency"]["p99_ms"],
            r["throughput_rps"],
            _rerank_summary(r),
            " / ".join(f"{v:g}" for v in r["cpu_ms_per_request"].values()),
            _errors(r["errors"]),
        )
        for r in bench["retrieve"]
    ]
    cpu_names = " / ".join(bench["retrieve"][0]["cpu_ms_per_request"]) if bench["retrieve"] else ""
    headers = (
        "mode",
        "concurrency",
        "requests",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "requests/s",
        "reranked",
        f"CPU ms per request ({cpu_names})",
        "errors",
    )
    note = (
        f"Closed loop: each of N clients sends the next SciFact test query as soon as its "
        f"previous answer arrived; default request (top_k {bench['request']['top_k']}, server "
        f"defaults otherwise), query cache off so every request embeds its query. The load "
        "client runs on the same 2 cores as the services. Reranker: "
        f"{bench['reranker']['description']}.\n"
    )
    return note + "\n" + table(headers, rows)


def _rerank_summary(row: dict[str, Any]) -> str:
    rerank = row.get("rerank")
    if not rerank:
        return "—"
    return (
        f"{rerank['used']}/{row['latency']['n']} used, mean {rerank['mean_reranked']:.1f} "
        f"of {rerank['mean_candidates']:.1f} candidates"
    )


def rerank_shares_section(bench: dict[str, Any]) -> str:
    """Per concurrency level with reranking: what became of it, as the gateway
    reads each answer (bench.load.rerank_outcomes); absent from older results."""
    rows = [
        _shares_row(r)
        for r in bench["retrieve"]
        if r["mode"] == "rerank" and "outcomes" in r.get("rerank", {})
    ]
    if not rows:
        return ""
    headers = (
        "concurrency",
        "answers",
        "full",
        "partial",
        "timeout",
        "other fallback",
        "degraded at the rerank step",
        "mean sent",
        "mean scored",
    )
    note = (
        "Shares of the answers of each rerank level above. full: every candidate sent and "
        "scored, none held back; partial: some scored (the Reranker stopped at its deadline, "
        "or the Retriever sent fewer candidates than configured because less time was left); "
        "timeout: none scored in time; other: too little time to ask, Reranker unavailable "
        "or an error. Sent and scored are means per answer (configured: "
        "`RAG_RERANK_CANDIDATES`).\n"
    )
    title = "### Rerank outcome shares per concurrency level\n\n"
    return title + note + "\n" + table(headers, rows)


def _shares_row(row: dict[str, Any]) -> tuple[Any, ...]:
    rerank = row["rerank"]
    outcomes = rerank["outcomes"]
    shares = outcomes["shares"]
    return (
        row["concurrency"],
        outcomes["answers"],
        shares["full"],
        shares["partial"],
        shares["timeout"],
        shares["other"],
        f"{outcomes['degraded']}/{outcomes['answers']}",
        round(rerank["mean_candidates"], 1),
        round(rerank["mean_reranked"], 1),
    )


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in errors.items()) or "0"


def model_section(bench: dict[str, Any]) -> str:
    emb, idx = bench["embedding"], bench["indexing"]
    after = bench.get("embedding_after_retrieve") or {
        "query_ms": {"p50_ms": None},
        "bound_qps": None,
    }
    raw = idx["raw_encoder"]
    best = f"best of {len(idx.get('runs', [])) or 1}"
    rows = [
        (
            "one query embedding, model alone (p50 / p95 ms)",
            f"{emb['query_ms']['p50_ms']} / {emb['query_ms']['p95_ms']}",
        ),
        (f"embedding-bound throughput: one query at a time, {best} (queries/s)", emb["bound_qps"]),
        (
            "the same two, re-measured right after the Retrieve runs (p50 ms; queries/s)",
            f"{after['query_ms']['p50_ms']}; {after['bound_qps']}",
        ),
        (f"query embedding in batches of {emb['batch']}, {best} (queries/s)", emb["batched_qps"]),
        (
            f"indexing through the Indexer, {best}: {idx['documents']} documents, "
            f"{idx['chunks']} chunks",
            f"{idx['docs_per_s']} docs/s, {idx['chunks_per_s']} chunks/s",
        ),
        (
            f"raw encoder on the same chunk texts, {best}",
            f"{raw['docs_per_s']} docs/s, {raw['chunks_per_s']} chunks/s",
        ),
        ("indexing / raw encoder", idx["share"]),
    ]
    return "### Model-bound reference points\n\n" + table(("what", "measured"), rows)


def deadline_section(bench: dict[str, Any]) -> str:
    rows = [
        (
            d["deadline_ms"],
            d["requests"],
            d["ok"],
            d["deadline_exceeded"],
            d["late"],
            d["latency"]["p50_ms"],
            d["latency"]["max_ms"],
            d["reranked_mean"],
        )
        for d in bench["deadline_check"]
    ]
    headers = (
        "caller deadline ms",
        "requests",
        "OK",
        "DEADLINE_EXCEEDED",
        "answers after the deadline",
        "p50 ms",
        "max ms",
        "mean reranked",
    )
    return "### Reranking under the caller's deadline\n\n" + table(headers, rows)


def memory_section(bench: dict[str, Any]) -> str:
    rows = [(name, m["rss_mib"], m["peak_rss_mib"]) for name, m in bench["memory"].items()]
    return "### Resident memory per service process\n\n" + table(
        ("process", "RSS MiB (end)", "peak RSS MiB"), rows
    )


def profile_section(bench: dict[str, Any]) -> str:
    profile = bench.get("profile")
    if not profile:
        return ""
    if "not_measured" in profile:
        return f"### Where the time goes\n\nNot profiled: {profile['not_measured']}\n"
    rows = [(p["category"], p["share"]) for p in profile.get("breakdown", [])]
    return "\n".join(
        [
            "### Where the time goes (py-spy, stack process, concurrency 1, no reranking)\n",
            f"{profile['samples']} samples of the stack process's threads over "
            f"{profile['seconds']} s while one client sent requests back to back; each sample "
            "is counted once, in the first category its stack matches.\n",
            table(("where", "share of samples"), rows),
        ]
    )
