"""The stack as an operator starts it: `python -m services.stack` as a child
process."""

from __future__ import annotations

import subprocess
import sys


def start_stack(env: dict[str, str], quiet: bool = False) -> subprocess.Popen[bytes]:
    """The stack process, its output in `stdout` (both streams) unless `quiet`."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.stack"],
        env=env,
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else subprocess.STDOUT,
    )
