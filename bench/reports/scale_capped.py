"""The scale section's table of the stack served inside a hard memory limit
(`python -m bench.scale --stack-memory-cap MIB`), next to the same index
served without one."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import table

HEADER = (
    "chunks",
    "limit MiB",
    "outcome",
    "peak MiB",
    "reclaims at the limit",
    "RSS after load MiB (own / file pages)",
    "c=1 p50 / p99 ms, unlimited → capped",
    "1% scope c=1 p50 ms, unlimited → capped",
    "c=16 req/s, unlimited → capped",
)


def _row(rows: list[dict[str, Any]], scope: str, concurrency: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["filter"] == scope and r["concurrency"] == concurrency), None)


def _pair(size: dict[str, Any], capped: dict[str, Any], scope: str, concurrency: int) -> str:
    """`unlimited → capped` of one load's figure (p50 / p99 at c=1, req/s at 16)."""
    figures = []
    for rows in (size["retrieve"], capped.get("retrieve", [])):
        row = _row(rows, scope, concurrency)
        if row is None:
            figures.append("–")
        elif concurrency > 1:
            figures.append(f"{row['throughput_rps']:.1f}")
        elif scope == "none":
            latency = row["latency_ms"]
            figures.append(f"{latency['p50_ms']:.1f} / {latency['p99_ms']:.1f}")
        else:
            figures.append(f"{row['latency_ms']['p50_ms']:.1f}")
    return " → ".join(figures)


def outcome(capped: dict[str, Any]) -> str:
    cap = capped["memory_cap"]
    if capped.get("failure") or cap["oom_kills"]:
        return f"failed ({cap['oom_kills']} OOM kills): {capped.get('failure', '')[:120]}"
    errors = sum(sum(r["errors"].values()) for r in capped.get("retrieve", []))
    return "served" if not errors else f"served, {errors} errors"


def _memory(capped: dict[str, Any]) -> str:
    after = capped.get("memory", {}).get("after load")
    if not after:
        return "–"
    return f"{after['rss_mib']:.0f} ({after['anon_mib']:.0f} / {after['file_mib']:.0f})"


def capped_rows(sizes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for size in sizes:
        capped = size.get("capped_serving")
        if not capped:
            continue
        cap = capped["memory_cap"]
        rows.append(
            (
                f"{size['chunks']:,}",
                cap["limit_mib"],
                outcome(capped),
                cap["peak_mib"],
                f"{cap['limit_hits']:,}",
                _memory(capped),
                _pair(size, capped, "none", 1),
                _pair(size, capped, "1% scope", 1),
                _pair(size, capped, "none", 16),
            )
        )
    return rows


def capped_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = capped_rows(sizes)
    if not rows:
        return []
    return [
        "### The stack under a hard memory limit\n",
        "`--stack-memory-cap`: after the timed serving above, each index was served again by a "
        "new stack process inside a memory cgroup (`bench/common/memory_cap.ChildMemoryCap`; "
        "the process joins it before the interpreter starts). The index's files were first "
        "evicted from the page cache, so every page the stack maps counts against the limit; "
        "at the limit the kernel drops mapped store pages (read again from disk when needed) "
        "and kills the process if its own memory alone outgrows it. Each filter's 300 queries "
        "were sent once before its timed loads, so the capped figures are the steady state "
        "under the limit; the unlimited ones are the first serving's (pages cached since the "
        "write).\n",
        table(HEADER, rows),
    ]


def capped_note(size: dict[str, Any]) -> str:
    """One phrase for the stack-RSS target's row: how it served under the cap."""
    capped = size.get("capped_serving")
    if not capped:
        return ""
    cap = capped["memory_cap"]
    served = outcome(capped)
    if not served.startswith("served"):
        return f"under a hard {cap['limit_mib']} MiB limit: {served}"
    return (
        f"under a hard {cap['limit_mib']} MiB limit: {served}, c=1 p50 / p99 "
        f"{_pair(size, capped, 'none', 1)} ms (unlimited → capped)"
    )
