"""Supervise the child processes of the local launcher (`make run`): start
them, notice when one dies, say which one and why, and stop the rest.

Why stop-all-and-exit rather than restart: `make run` is a local development
launcher, so a crash must be *surfaced*, not masked behind a restart loop that
hides it in a log nobody reads (and, for a crash at start-up, loops forever).
Restarting is also not the launcher's job: after a crash the embedded stores are
brought back in step by the Indexer itself at its next run (see "Crash safety"
in docs/indexing.md), so the right move is to name the dead service, show the
end of its log, stop everything else and exit non-zero for the developer to
rerun.

Every child is reaped (`Popen.poll`/`Popen.wait`), so none is left a zombie,
and the survivors are stopped gracefully: SIGTERM, a bounded wait, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

EXIT_CHILD_DIED = 1
TAIL_LINES = 20
# Enough for TAIL_LINES of ordinary log lines without reading a huge log whole.
TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class ChildSpec:
    """How to start one child: its name, command line and log file (stdout and
    stderr both go there). `label` is what the start-up line shows."""

    name: str
    argv: Sequence[str]
    log_path: Path
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    label: str = ""

    def describe(self) -> str:
        return self.label or shlex.join(self.argv)


@dataclass(frozen=True)
class ExitedChild:
    """A child that exited while it was supposed to be running."""

    name: str
    returncode: int
    log_path: Path

    def status(self) -> str:
        """`exited with status 3` or `killed by SIGKILL` (Popen reports a
        death by signal N as returncode -N)."""
        if self.returncode >= 0:
            return f"exited with status {self.returncode}"
        try:
            return f"killed by {signal.Signals(-self.returncode).name}"
        except ValueError:
            return f"killed by signal {-self.returncode}"

    def report(self, tail_lines: int = TAIL_LINES) -> str:
        """The message shown to the developer: who died, how, where its log is,
        and the end of that log (usually the traceback that explains it)."""
        head = f"{self.name} {self.status()} unexpectedly; log: {self.log_path}"
        tail = log_tail(self.log_path, tail_lines)
        if not tail:
            return f"{head}\n  (the log is empty)"
        body = "\n".join(f"  | {line}" for line in tail)
        return f"{head}\nlast {len(tail)} lines of {self.log_path}:\n{body}"


class ChildExited(Exception):
    """Raised by `Supervisor.check()` so waits deep in the launcher can stop
    as soon as a child dies instead of running into their own timeouts."""

    def __init__(self, child: ExitedChild) -> None:
        super().__init__(f"{child.name} {child.status()}")
        self.child = child


def log_tail(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of `path` ([] when it is missing or empty)."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - TAIL_BYTES))
            data = log.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-lines:]


@dataclass
class Running:
    spec: ChildSpec
    proc: subprocess.Popen[bytes]


@dataclass
class Supervisor:
    """Starts `children`, reports the first one that exits, stops all of them.

    Any exit before `stop_all()` counts as unexpected, even status 0: the
    services are meant to run until the launcher stops them."""

    children: Sequence[ChildSpec]
    out: TextIO = field(default_factory=lambda: sys.stderr)
    grace_s: float = 15.0
    running: list[Running] = field(default_factory=list)
    stopping: bool = False

    def start(self) -> None:
        """Start every child, each with its output in its own log file."""
        for spec in self.children:
            print(f"  starting {spec.name:<9} ({spec.describe()}; log: {spec.log_path})")
            spec.log_path.parent.mkdir(parents=True, exist_ok=True)
            # The child keeps its own copy of the descriptor; ours is closed at once.
            with spec.log_path.open("wb") as log:
                proc = subprocess.Popen(
                    list(spec.argv),
                    cwd=spec.cwd,
                    env=dict(spec.env) if spec.env is not None else None,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            self.running.append(Running(spec, proc))

    def poll(self) -> ExitedChild | None:
        """The first child found exited (and reaped), or None while all run.
        After `stop_all()` has begun, exits are expected and not reported."""
        if self.stopping:
            return None
        for child in self.running:
            returncode = child.proc.poll()
            if returncode is not None:
                return ExitedChild(child.spec.name, returncode, child.spec.log_path)
        return None

    def check(self) -> None:
        """Raise `ChildExited` when a child has died (a `check_alive` hook)."""
        exited = self.poll()
        if exited is not None:
            raise ChildExited(exited)

    def fail(self, exited: ExitedChild) -> int:
        """Report `exited`, stop the others and return the exit code to use."""
        print(f"\nerror: {exited.report()}", file=self.out, flush=True)
        print("stopping the other services.", file=self.out, flush=True)
        self.stop_all()
        return EXIT_CHILD_DIED

    def stop_all(self) -> None:
        """SIGTERM every child still running, give them `grace_s` (together)
        to exit, SIGKILL the stragglers, and reap all of them. Idempotent."""
        self.stopping = True
        for child in self.running:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s  # one grace period for all
        for child in self.running:
            try:
                child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                late = f"  {child.spec.name} outlived SIGTERM by {self.grace_s:g}s; killing it"
                print(late, file=self.out)
                child.proc.kill()
                child.proc.wait()
