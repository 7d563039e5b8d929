"""The launcher (scripts/run_local.py) supervising its children in every phase:
start-up, indexing, the --check query and while up, plus Ctrl-C.

The children here are FAULT-INJECTION STAND-INS, not the real services: tiny
`python -c` programs that sleep, exit with a status or SIGKILL themselves, so a
death can be placed in each phase cheaply. Where a phase needs a real service
(readiness, indexing, the smoke query), the harness below swaps in a stand-in
for that step, also labelled as such; the supervision code under test is the
launcher's own."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scripts import run_local
from scripts.supervisor import ChildExited, ChildSpec, Supervisor
from tests.support.stack import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SLEEPER = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
# Stand-in for a service that crashes after a moment / is OOM-killed after a moment.
CRASH_SOON = "import sys, time; print('simulated crash', flush=True); time.sleep(1); sys.exit(3)"
KILLED_SOON = (
    "import os, time; print('simulated OOM kill', flush=True); time.sleep(1.5); "
    "os.kill(os.getpid(), 9)"
)

# Runs the launcher's own run() in a separate process (it blocks SIGINT/SIGTERM
# and waits for them, which must not happen inside pytest) with stand-in children.
HARNESS = """
import json, sys, time
from pathlib import Path
from scripts import run_local
from scripts.supervisor import ChildSpec, Supervisor
# Fault-injection stand-ins: no real services run, so readiness, indexing and
# the smoke query are replaced; the supervision around them is the launcher's own.
run_local.wait_until_ready = lambda supervisor, logs: run_local.READY
run_local.index_docs = lambda supervisor: None
run_local.smoke_query = lambda: time.sleep(3)
logs, check, children = Path(sys.argv[1]), sys.argv[2] == "check", json.loads(sys.argv[3])
specs = [ChildSpec(n, [sys.executable, "-c", c], logs / f"{n}.log") for n, c in children]
sys.exit(run_local.run(Supervisor(specs, grace_s=5), check, logs))
"""


def stand_in(tmp_path: Path, name: str, code: str) -> ChildSpec:
    return ChildSpec(name, [sys.executable, "-c", code], tmp_path / f"{name}.log")


Launch = Callable[[Path, str, dict[str, str]], "subprocess.Popen[str]"]


@pytest.fixture
def launch() -> Iterator[Launch]:
    """Start the harness; whatever is left of it when the test ends (e.g. a
    launcher that failed to notice a death) is killed, group and all."""
    launched: list[subprocess.Popen[str]] = []

    def start(tmp_path: Path, mode: str, children: dict[str, str]) -> subprocess.Popen[str]:
        stand_ins = json.dumps(list(children.items()))
        argv = [sys.executable, "-c", HARNESS, str(tmp_path), mode, stand_ins]
        launched.append(subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group, so a test can "press Ctrl-C" on it
        ))  # fmt: skip
        return launched[-1]

    yield start
    for launcher in launched:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.communicate()


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):  # stopped and reaped, not orphaned
        os.kill(pid, 0)


def wait_for_pid(log: Path, timeout_s: float = 20) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.strip():
            return int(text.split()[0])
        time.sleep(0.05)
    raise AssertionError(f"{log} never showed a pid")


def test_a_child_dying_during_start_up_ends_the_wait_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Closed ports: readiness never comes, so only the death can end the wait early.
    monkeypatch.setattr(run_local, "PORTS", {name: free_port() for name in run_local.PORTS})
    out = io.StringIO()
    gateway = stand_in(tmp_path, "gateway", CRASH_SOON)
    supervisor = Supervisor([stand_in(tmp_path, "stack", SLEEPER), gateway], out=out, grace_s=5)

    started = time.monotonic()
    code = run_local.run(supervisor, check=True, logs=tmp_path)

    assert code != 0
    assert time.monotonic() - started < 30  # not the 180 s readiness timeout
    message = out.getvalue()
    assert f"gateway exited with status 3 unexpectedly; log: {gateway.log_path}" in message
    assert "simulated crash" in message
    assert all(running.proc.returncode is not None for running in supervisor.running)


def test_a_child_dying_while_indexing_stops_the_ingest(tmp_path: Path) -> None:
    supervisor = Supervisor([stand_in(tmp_path, "stack", CRASH_SOON)], out=io.StringIO())
    supervisor.start()
    pid_file = tmp_path / "ingest.pid"
    # Stand-in for the ingest CLI: a long run that never finishes by itself.
    ingest = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    ingest += "time.sleep(60)"
    try:
        with pytest.raises(ChildExited) as died:
            run_local.run_supervised([sys.executable, "-c", ingest], supervisor)
    finally:
        supervisor.stop_all()

    assert died.value.child.name == "stack" and died.value.child.returncode == 3
    assert_gone(int(pid_file.read_text()))


def test_a_child_killed_while_up_is_reported_and_the_launcher_exits_non_zero(
    tmp_path: Path, launch: Launch
) -> None:
    launcher = launch(tmp_path, "up", {"stack": SLEEPER, "reranker": KILLED_SOON})
    _, stderr = launcher.communicate(timeout=60)

    assert launcher.returncode == 1
    assert f"reranker killed by SIGKILL unexpectedly; log: {tmp_path}/reranker.log" in stderr
    assert "simulated OOM kill" in stderr
    assert_gone(wait_for_pid(tmp_path / "stack.log"))


def test_check_mode_fails_loudly_when_a_child_dies_during_the_query(
    tmp_path: Path, launch: Launch
) -> None:
    launcher = launch(tmp_path, "check", {"gateway": CRASH_SOON, "stack": SLEEPER})
    _, stderr = launcher.communicate(timeout=60)

    assert launcher.returncode == 1
    assert f"gateway exited with status 3 unexpectedly; log: {tmp_path}/gateway.log" in stderr
    assert_gone(wait_for_pid(tmp_path / "stack.log"))


def test_ctrl_c_stops_everything_quietly_with_status_zero(tmp_path: Path, launch: Launch) -> None:
    launcher = launch(tmp_path, "up", {"stack": SLEEPER, "gateway": SLEEPER})
    pids = [wait_for_pid(tmp_path / f"{name}.log") for name in ("stack", "gateway")]
    time.sleep(0.5)  # past start-up, into the wait for Ctrl-C

    os.killpg(launcher.pid, signal.SIGINT)  # like a terminal: the whole group gets it
    _, stderr = launcher.communicate(timeout=60)

    assert launcher.returncode == 0, stderr
    assert "unexpectedly" not in stderr  # children dying of the same Ctrl-C are no crash
    for pid in pids:
        assert_gone(pid)
