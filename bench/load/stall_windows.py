"""When the stack's vector store optimised its segments, from the stack's own
log, and which answers were in flight meanwhile.

Measured (qdrant-edge-py 0.9.0): `EdgeShard.optimize()` holds the GIL for its
whole run (a pure-Python thread made no progress for 3.9 s while it built the
HNSW index of 15k vectors), so every thread of the embedded stack, the event
loop included, stops until it returns. The Indexer logs each optimisation
that changed something (`vector_index_optimized seconds=...`) when it ends;
its start is that moment minus its duration.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.load.paced_load import Sample

# "2026-11-23T20:59:49.174567Z [info     ] vector_index_optimized   seconds=1.87 store=..."
_OPTIMIZED = re.compile(r"^(\S+Z) .*\bvector_index_optimized\b.*\bseconds=([\d.]+)")


@dataclass(frozen=True)
class Window:
    start: float  # Unix time
    end: float

    def overlaps(self, sample: Sample) -> bool:
        return (
            sample.sent_at <= self.end and sample.sent_at + sample.latency_ms / 1000 >= self.start
        )


def optimize_windows(log_path: Path) -> list[Window]:
    if not log_path.is_file():
        return []
    windows = []
    for line in log_path.read_text(errors="replace").splitlines():
        if match := _OPTIMIZED.match(line):
            end = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
            windows.append(Window(end - float(match.group(2)), end))
    return windows


def in_flight(samples: Sequence[Sample], windows: Sequence[Window]) -> list[Sample]:
    """The samples whose request was in flight during any of `windows`."""
    return [s for s in samples if any(w.overlaps(s) for w in windows)]


def stall_summary(samples: Sequence[Sample], windows: Sequence[Window]) -> dict[str, Any]:
    caught = in_flight(samples, windows)
    return {
        "optimizations": len(windows),
        "seconds": [round(w.end - w.start, 2) for w in windows],
        "answers_in_flight": len(caught),
        "degraded_in_flight": sum(1 for s in caught if s.degraded),
        "errors_in_flight": sum(1 for s in caught if s.error),
    }
