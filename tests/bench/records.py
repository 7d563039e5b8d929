"""Parts of bench result records that report tests build again and again."""

from __future__ import annotations

# bench.common.record's machine block, with plain values.
MACHINE = {
    "cpu": "cpu",
    "logical_cpus": 2,
    "memory_gib": 1,
    "python": "3",
    "torch": "t",
    "torch_threads": 2,
    "load_average_1m": 0.1,
}
