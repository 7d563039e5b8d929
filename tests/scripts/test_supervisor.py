"""scripts/supervisor.py against real child processes: a dead child is reported
by name, exit status and log path (with the end of its log), the survivors are
stopped, every child is reaped, and the exit code says it failed."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.supervisor import ChildSpec, ExitedChild, Supervisor

pytestmark = pytest.mark.unit

SLEEPER = "import time; time.sleep(60)"
# Fault-injection stand-ins for a crashing service: 30 numbered log lines, then
# exit with status 3, or (second one) a SIGKILL from itself, as the OOM killer would.
CRASHER = "for i in range(30): print(f'line {i:02d}')\nimport sys; sys.exit(3)"
SELF_KILLER = "import os, signal; print('about to die', flush=True); os.kill(os.getpid(), 9)"
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def child(tmp_path: Path, name: str, code: str) -> ChildSpec:
    return ChildSpec(name, [sys.executable, "-c", code], tmp_path / "logs" / f"{name}.log")


@pytest.fixture
def out() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    """Whatever a test started is stopped, even when the test fails."""
    made: list[Supervisor] = []
    yield made
    for supervisor in made:
        supervisor.stop_all()


def started(supervisors: list[Supervisor], out: io.StringIO, *specs: ChildSpec) -> Supervisor:
    supervisor = Supervisor(specs, out=out, grace_s=5.0)
    supervisors.append(supervisor)
    supervisor.start()
    return supervisor


def wait_for_exit(supervisor: Supervisor, timeout_s: float = 20.0) -> ExitedChild:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        exited = supervisor.poll()
        if exited is not None:
            return exited
        time.sleep(0.05)
    raise AssertionError("no child exited")


def assert_all_reaped(supervisor: Supervisor) -> None:
    for running in supervisor.running:
        assert running.proc.returncode is not None, running.spec.name
        with pytest.raises(ChildProcessError):  # already reaped: no zombie left behind
            os.waitpid(running.proc.pid, os.WNOHANG)


def test_a_child_exiting_with_a_status_is_reported_and_the_rest_stopped(
    tmp_path: Path, out: io.StringIO, supervisors: list[Supervisor]
) -> None:
    sleeper, crasher = child(tmp_path, "sleeper", SLEEPER), child(tmp_path, "crasher", CRASHER)
    supervisor = started(supervisors, out, sleeper, crasher)

    exited = wait_for_exit(supervisor)
    code = supervisor.fail(exited)

    message = out.getvalue()
    assert code != 0
    assert exited == ExitedChild("crasher", 3, crasher.log_path)
    assert "crasher exited with status 3 unexpectedly" in message
    assert str(crasher.log_path) in message
    assert "line 29" in message and "line 10" in message  # the last 20 lines ...
    assert "line 09" not in message  # ... and no more
    assert supervisor.running[0].proc.returncode == -signal.SIGTERM  # stopped gracefully
    assert_all_reaped(supervisor)


def test_a_child_killed_by_a_signal_is_reported_by_the_signal_name(
    tmp_path: Path, out: io.StringIO, supervisors: list[Supervisor]
) -> None:
    killer = child(tmp_path, "reranker", SELF_KILLER)
    supervisor = started(supervisors, out, child(tmp_path, "stack", SLEEPER), killer)

    code = supervisor.fail(wait_for_exit(supervisor))

    message = out.getvalue()
    assert code != 0
    assert "reranker killed by SIGKILL unexpectedly" in message
    assert str(killer.log_path) in message
    assert "about to die" in message
    assert_all_reaped(supervisor)


def test_poll_reports_nothing_while_all_run_and_nothing_once_stopping(
    tmp_path: Path, out: io.StringIO, supervisors: list[Supervisor]
) -> None:
    supervisor = started(supervisors, out, child(tmp_path, "a", SLEEPER))
    assert supervisor.poll() is None

    supervisor.stop_all()

    assert supervisor.poll() is None  # an exit the supervisor asked for is no failure
    assert_all_reaped(supervisor)
    assert out.getvalue() == ""


def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(
    tmp_path: Path, out: io.StringIO, supervisors: list[Supervisor]
) -> None:
    stubborn = child(tmp_path, "stubborn", IGNORES_TERM)
    supervisor = started(supervisors, out, stubborn)
    supervisor.grace_s = 0.5
    deadline = time.monotonic() + 20
    while "ready" not in stubborn.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)

    supervisor.stop_all()

    assert supervisor.running[0].proc.returncode == -signal.SIGKILL
    assert "stubborn outlived SIGTERM by 0.5s; killing it" in out.getvalue()
    assert_all_reaped(supervisor)


@pytest.mark.parametrize(
    ("returncode", "status"),
    [
        (0, "exited with status 0"),
        (3, "exited with status 3"),
        (-signal.SIGKILL, "killed by SIGKILL"),
        (-signal.SIGSEGV, "killed by SIGSEGV"),
        (-200, "killed by signal 200"),
    ],
)
def test_exit_status_wording(returncode: int, status: str) -> None:
    assert ExitedChild("x", returncode, Path("x.log")).status() == status


def test_report_says_when_the_log_is_empty_or_missing(tmp_path: Path) -> None:
    report = ExitedChild("gateway", 1, tmp_path / "missing.log").report()
    assert report.startswith(f"gateway exited with status 1 unexpectedly; log: {tmp_path}")
    assert "(the log is empty)" in report
