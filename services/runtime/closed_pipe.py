"""A reader that goes away is not an error: `rag-cli verify --json | head -c 10`,
`python -m services.stack --help | head -1`.

Python raises BrokenPipeError on the write after the reader closed the pipe,
and again when it flushes stdout at exit; Unix tools stop quietly instead,
with the status a shell gives SIGPIPE (128 + 13)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

CLOSED_PIPE_STATUS = 141


def quiet_on_closed_pipe(run: Callable[[], int | None]) -> int:
    """`run()`'s status (0 for None, a SystemExit's code), or 141 with no
    traceback when stdout's reader went away."""
    try:
        try:
            status = run()
        except SystemExit as exc:  # argparse's --help and usage errors
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        return status or 0
    except BrokenPipeError:
        return stdout_closed()


def stdout_closed() -> int:
    """The status to exit with once stdout's reader is gone. Python flushes
    stdout once more at exit: from here on that goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_PIPE_STATUS
