"""The latency-distribution plot embedded in docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on servers and in CI
import matplotlib.pyplot as plt


def plot_latencies(series: list[tuple[str, list[float]]], path: Path, title: str) -> Path:
    """One box per (label, latencies in ms), log scale, whiskers at p1/p99."""
    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=110)
    labels = [label for label, _ in series]
    data = [values or [0.0] for _, values in series]
    style: dict[str, Any] = {"showfliers": True, "whis": (1, 99), "widths": 0.6}
    ax.boxplot(data, tick_labels=labels, **style)
    ax.set_yscale("log")
    ax.set_ylabel("Retrieve latency at the client, ms (log scale)")
    ax.set_title(title)
    ax.grid(axis="y", which="both", alpha=0.3)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
