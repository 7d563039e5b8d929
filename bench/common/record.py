"""What every result file records about its run (command, date, git revision,
machine) and how latencies are summarised, so no figure on the benchmark page
needs a hand-typed context and every page summarises latency alike."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.common.paths import ROOT


def run_record(argv: Sequence[str]) -> dict[str, Any]:
    """Who ran what, when, on which revision and machine: written into every
    result file so no figure there needs a hand-typed context."""
    return {
        "command": shlex.join([Path(sys.executable).name, *argv]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_revision": _git_revision(),
        "machine": machine_description(),
    }


def _git_revision() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=30
        )
        return out.stdout.strip()

    revision = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{revision}{' (uncommitted changes)' if dirty else ''}"


def machine_description() -> dict[str, Any]:
    import torch

    return {
        "cpu": _cpu_model(),
        # The model name alone ("AMD EPYC", "Intel(R) Xeon(R) Processor") does
        # not tell two virtual hosts apart, and absolute times differ between
        # them by a third or more: family/model/stepping and clock do.
        "cpu_id": _cpu_id(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        # The machine may be shared: the load at the start says how quiet it was.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _cpu_model() -> str:
    return _first_cpu(_cpuinfo()).get("model name") or platform.processor() or "unknown"


def _cpu_id() -> str:
    return cpu_identity(_cpuinfo())


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _first_cpu(cpuinfo: str) -> dict[str, str]:
    """The first CPU's block of /proc/cpuinfo's text, as key: value."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if not key and fields:
            break  # the end of the first CPU's block
        fields.setdefault(key, value.strip())
    return fields


def cpu_identity(cpuinfo: str) -> str:
    """The first CPU's family, model, stepping and clock from /proc/cpuinfo's
    text, e.g. "family 6 model 167 stepping 1, 2600 MHz"; "" if absent."""
    fields = _first_cpu(cpuinfo)
    named = (("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
    parts = [f"{name} {fields[key]}" for key, name in named if key in fields]
    if not parts:
        return ""
    mhz = fields.get("cpu MHz")
    return ", ".join([" ".join(parts), *([f"{float(mhz):.0f} MHz"] if mhz else [])])


# ------------------------------------------------------------------ summaries


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max in ms (empty input: zeros)."""
    if not latencies_ms:
        return {"n": 0, "p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "max_ms": 0.0}
    values = np.asarray(latencies_ms, dtype=float)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "n": int(values.size),
        "p50_ms": round(float(p50), 2),
        "p95_ms": round(float(p95), 2),
        "p99_ms": round(float(p99), 2),
        "mean_ms": round(float(values.mean()), 2),
        "max_ms": round(float(values.max()), 2),
    }
