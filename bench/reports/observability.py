"""The benchmark page's section on what metrics and tracing cost a search
(`python -m bench.load.observability_cost`)."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "observability_cost.json"
HEADERS = (
    "configuration",
    "requests",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "CPU ms/request (stack)",
    "p50 vs baseline",
    "p50 vs metrics off",
    "p50 per round, ms",
    "errors",
)


def observability_section(result: dict[str, Any]) -> str:
    rows = [
        (
            row["name"],
            row["latency"]["n"],
            *(f"{row['latency'][key]:.2f}" for key in ("p50_ms", "p95_ms", "p99_ms")),
            f"{row['cpu_ms_per_request']:.2f}",
            _ratio(row["p50_vs_baseline"]),
            _ratio(row["p50_vs_metrics_off"]),
            " / ".join(f"{p50:.2f}" for p50 in row["round_p50_ms"]),
            ", ".join(f"{k} {v}" for k, v in row["errors"].items()) or "none",
        )
        for row in result["configurations"]
    ]
    return "\n".join(
        [
            "## Cost of metrics and tracing: Retrieve at concurrency 1\n",
            provenance(result),
            _about(result),
            table(HEADERS, rows),
            _checks(result),
            "### Observability target\n",
            _targets(result["targets"]),
        ]
    )


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _targets(targets: list[dict[str, Any]]) -> str:
    """As markdown.targets_table, the ratio with three decimals."""
    rows = [
        (
            t["what"],
            f"{'≥' if t['direction'] == 'at_least' else '≤'} {t['threshold']:g}",
            _ratio(t["measured"]),
            t["verdict"],
            t.get("note", ""),
        )
        for t in targets
    ]
    return table(("target", "threshold", "measured", "verdict", "note"), rows)


def _about(result: dict[str, Any]) -> str:
    baseline = result["baseline"]
    if baseline["measured"]:
        before = (
            f"`baseline` is revision `{baseline['revision']}` (`{baseline['commit'][:12]}`), the "
            "code before per-service metrics and tracing, run from a temporary git worktree with "
            "the same Python environment"
        )
    else:
        before = f"the baseline revision was not measured ({baseline['reason']})"
    index = result["index"]
    rounds = result["rounds"]
    return (
        f"Retrieve on {result['dataset']} ({index['documents']} documents, {index['chunks']} "
        "chunks), one caller, no reranking, top_k "
        f"{result['request']['top_k']} with a scope filter, query cache off so every request "
        "embeds its query. Each configuration is a fresh `python -m services.stack` process on "
        f"the same embedded index: {before}; `metrics off` is this code with "
        "`RAG_METRICS_ENABLED=false`; `metrics on, tracing off` serves Prometheus metrics on "
        f"listeners of their own, the Retriever's scraped every {result['scrape_interval_s']:g} s "
        "by a thread of the load client (Prometheus defaults to 15-60 s); `metrics on, tracing "
        "on` also exports every span (`OTEL_TRACES_SAMPLER=always_on`, OTLP/HTTP, the SDK's "
        "batch processor defaults) to a sink in the load client that answers 200 and counts "
        "what arrives (scraper and sink share the load client's interpreter, so their work "
        f"lands in the measured latency too: pessimistic). {rounds} "
        f"round{'s' if rounds != 1 else ''}; each runs every configuration once "
        f"({result['warmup_per_process']} warm-up requests discarded, then "
        f"{result['requests_per_round']} measured), the order rotating from round to round so "
        "drift of a shared machine is spread over all of them. Latency is measured at the "
        "client; p50/p95/p99 are over all rounds; CPU is the stack process's user + system "
        "time over the measured requests. The ratios divide p50s.\n"
    )


def _checks(result: dict[str, Any]) -> str:
    lines = []
    for row in result["configurations"]:
        if "metrics_counted_every_request" in row:
            verdict = "yes" if row["metrics_counted_every_request"] else "**no**"
            lines.append(
                f"- `{row['name']}`: the last scrape's `grpc_server_handled_total` for Retrieve "
                f"counted every request sent (warm-up included): {verdict}."
            )
        if sink := row.get("sink"):
            names = ", ".join(f"{name} {count}" for name, count in sink["spans_by_name"].items())
            verdict = "yes" if sink["every_retrieve_traced"] else "**no**"
            lines.append(
                f"- `{row['name']}`: the OTLP sink received {sink['export_requests']} export "
                f"requests, {sink['bytes']:,} bytes, {sink['spans']} spans in {sink['traces']} "
                f"traces (by name: {names}); a Retrieve span for every request sent (warm-up "
                f"included): {verdict}."
            )
    return "\n".join(lines) + "\n" if lines else ""
