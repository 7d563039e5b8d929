"""A reader that goes away (`| head -1`) ends a command quietly, with the
status a shell gives SIGPIPE, instead of a BrokenPipeError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.runtime.closed_pipe import CLOSED_PIPE_STATUS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
VERBOSE = (
    "import sys; from services.runtime.closed_pipe import quiet_on_closed_pipe; "
    "sys.exit(quiet_on_closed_pipe(lambda: [print('line', i) for i in range(10**6)] and 0))"
)


def first_line_then_close(argv: list[str]) -> tuple[int, str]:
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as `head -1` does
    err = proc.stderr.read()
    return proc.wait(timeout=60), err


def test_a_command_whose_reader_goes_away_stops_quietly() -> None:
    status, err = first_line_then_close([sys.executable, "-c", VERBOSE])
    assert (status, err) == (CLOSED_PIPE_STATUS, "")


def test_a_service_help_read_by_head_leaves_no_traceback() -> None:
    status, err = first_line_then_close([sys.executable, "-m", "services.stack", "--help"])
    assert status in (0, CLOSED_PIPE_STATUS) and "Traceback" not in err, err
