"""The gateway load-test section of docs/benchmarks.md, rendered from
bench/results/gateway_load.json (written by `python -m bench.load.gateway`)."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import table

OUTCOMES = (
    "all",
    "allowed",
    "rate_limited",
    "origin_not_allowed",
    "budget_exhausted",
    "breaker_open",
    "public_disabled",
)


def gateway_section(result: dict[str, Any]) -> str:
    cfg = result["config"]
    cpu = result.get("cpu", {})
    rows = [
        (name, stats["count"], stats["p50"], stats["p95"], stats["p99"], stats["max"])
        for name in OUTCOMES
        if (stats := result["latency_ms"].get(name))
    ]
    unexpected = result.get("unexpected_5xx") or {}
    # Runs recorded before the command was stored were made under the module's former name.
    command = (
        result.get("command") or f"python -m bench.gateway_load --duration {cfg['duration_s']:g}"
    )
    verdict = "none" if not unexpected else ", ".join(f"{k}: {v}" for k, v in unexpected.items())
    return "\n".join(
        [
            "## Gateway under load (loopback)",
            "",
            f"Command `{command}`, "
            f"{result['recorded_at']}; {result['machine'].get('cpus')} CPUs, "
            f"1-minute load average at the start {cpu.get('load_average_1m_at_start', '?')}. "
            f"{cfg['clients']} well-behaved clients, {cfg['greedy_clients']} clients that never "
            f"pause, {cfg['foreign_origin_clients']} client from a foreign origin; rate limit "
            f"`{cfg['rate_limit_per_client']}` per client; downstream: {cfg['retriever']}, so the "
            "figures are the gateway's own cost (gates, JSON, gRPC hop), not search.",
            "",
            table(("outcome", "requests", "p50 ms", "p95 ms", "p99 ms", "max ms"), rows),
            f"Throughput {result['throughput_rps']} requests/s "
            f"({result['allowed_rps']} allowed/s); "
            f"HTTP statuses {result['by_status']}; unexpected 5xx: {verdict}; transport errors: "
            f"{result.get('transport_errors', 0)}; gateway CPU "
            f"{cpu.get('gateway_cpu_ms_per_request', '?')} ms per request.",
            "",
        ]
    )
