"""Markdown pieces every section of docs/benchmarks.md uses: tables, the
provenance line of a result and its targets, so all sections look alike."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):  # metrics in [0, 1] get three decimals, times one
        return f"{value:.3f}" if 0 <= value <= 1 else f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def provenance(result: dict[str, Any]) -> str:
    m = result["machine"]
    return (
        f"Command `{result['command']}`, {result['date']}, revision `{result['git_revision']}`; "
        f"machine: {m['cpu']}{f' ({cpu_id})' if (cpu_id := m.get('cpu_id')) else ''}, "
        f"{m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB, "
        f"Python {m['python']}, torch {m['torch']} ({m['torch_threads']} threads), "
        f"1-minute load average at the start {m['load_average_1m']}.\n"
    )


def targets_table(targets: list[dict[str, Any]]) -> str:
    rows = [
        (t["what"], _target_label(t), t["measured"], t["verdict"], t.get("note", ""))
        for t in targets
    ]
    return table(("target", "threshold", "measured", "verdict", "note"), rows)


def _target_label(target: dict[str, Any]) -> str:
    sign = "≥" if target["direction"] == "at_least" else "≤"
    return f"{sign} {target['threshold']:g}{target['unit']}"
