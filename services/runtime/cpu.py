"""CPU threading policy for a process that shares a few cores with others.

OpenMP (PyTorch's CPU thread pool) lets idle worker threads spin while they
wait for work by default. On a 2-core machine shared with other services the
spinning threads take the cores the compute threads need: measured here under
a load average of ~4, a 5-pair MiniLM-L6 batch took 975 ms p50 with spinning
and 202 ms with passive waits. The policy is read when OpenMP starts, i.e.
when torch is imported, so it must be set before that.
"""

from __future__ import annotations

import os


def prefer_passive_waits() -> None:
    """Make OpenMP threads sleep instead of spin when idle, unless the
    operator chose otherwise. Call before importing torch."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
