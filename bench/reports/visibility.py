"""The benchmark page's section on the committed-generation filter's cost."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "visibility_filter.json"


def visibility_section(result: dict[str, Any]) -> str:
    latency = result["latency"]
    rows = []
    for channel in ("vector", "lexical"):
        plain, filtered = latency[channel], latency[f"{channel}_filtered"]
        overhead = filtered["p50_ms"] - plain["p50_ms"]
        rows.append(
            (
                channel,
                plain["p50_ms"],
                filtered["p50_ms"],
                plain["p99_ms"],
                filtered["p99_ms"],
                f"{overhead:+.2f}",
            )
        )
    return (
        "## Cost of never serving uncommitted rows\n\n"
        + provenance(result)
        + f"\nOne embedded store pair with {result['chunks']} synthetic chunks, "
        f"{result['uncommitted_share']:.0%} of them from an uncommitted run; "
        f"{result['queries']} searches per channel (limit 50, a scope filter in both), "
        "with and without the committed-generation clause, interleaved (which of a pair runs "
        "first alternates). Times in ms, in-process "
        "(no gRPC).\n\n"
        + table(
            ("channel", "p50 without", "p50 with", "p99 without", "p99 with", "p50 difference"),
            rows,
        )
    )
