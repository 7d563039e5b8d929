"""A crash loop in the style of qdrant/crasher, against the real stack.

`python -m services.stack` (embedded stores, or PostgreSQL when the store
environment says so) runs as its own process group; a writer thread upserts
small documents through the Indexer, each carrying a unique token, and keeps a
ledger of what was acknowledged; a reader thread runs Retrieve throughout
(errors while the stack is down are expected and counted). The loop SIGKILLs
the whole process group at seeded random moments, some of them before the
stack is ready (during start-up or the recovery of the run the previous kill
cut short), and restarts it. At the end (tests.support.crash_audit) every
acknowledged document must be retrievable, no document may be half-visible,
and `verify` must be clean.

Used by tests/stack/test_crash_loop.py (bounded) and bench/load/crash_loop.py
(the long run). The loop runs until BOTH its time budget and its kill count
are reached, and gives up with a clear message at `time_cap_s`, so a slow,
shared machine makes it longer, never flaky.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.runtime.healthcheck import is_serving
from tests.support.crash_clients import Endpoints, Ledger, Reader, Writer
from tests.support.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
# `python -m services.stack`, killed too if this process dies (a test run
# stopped from outside must not leave a stack running).
CHILD_OF = "tests.support.child_of"
# Every third start is killed before it is ready (start-up or recovery).
STARTUP_KILL_EVERY = 3


class CrashLoopError(RuntimeError):
    """The loop could not run as asked (a start failed, the time cap passed)."""


class PortTaken(CrashLoopError):
    """Another process took a port between choosing and binding it."""


@dataclass(frozen=True)
class CrashLoopConfig:
    data_dir: Path
    log_dir: Path
    duration_s: float  # at least this long ...
    min_kills: int  # ... and at least this many kills
    time_cap_s: float  # give up (CrashLoopError) past this
    uptime_s: tuple[float, float] = (5.0, 15.0)  # serving time before a kill
    ready_timeout_s: float = 300.0  # one start, generous for a loaded machine
    seed: int = 37
    # Store settings for the stack's environment (empty: embedded stores in
    # data_dir; POSTGRES_URL/POSTGRES_SCHEMA: the PostgreSQL mode).
    store_env: Mapping[str, str] = field(default_factory=dict)
    stack_env: Mapping[str, str] = field(default_factory=dict)  # anything else


@dataclass
class LoopFigures:
    kills: int = 0
    kills_during_startup: int = 0
    kill_times: list[float] = field(default_factory=list)
    restart_to_ready_s: list[float] = field(default_factory=list)
    restarts_with_recovery: int = 0
    port_retries: int = 0
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        ready = self.restart_to_ready_s
        return {
            "kills": self.kills,
            "kills_during_startup": self.kills_during_startup,
            "restarts_with_recovery": self.restarts_with_recovery,
            "restart_to_ready_s": {
                "n": len(ready),
                "p50": round(statistics.median(ready), 2) if ready else None,
                "max": round(max(ready), 2) if ready else None,
            },
            "loop_s": round(self.elapsed_s, 1),
        }


class StackProcess:
    """One `python -m services.stack` in a process group of its own."""

    def __init__(self, config: CrashLoopConfig, log_path: Path) -> None:
        self.indexer_port, self.retriever_port = free_port(), free_port()
        env = {
            **os.environ,
            "RAG_DATA_DIR": str(config.data_dir),
            "RAG_INDEXER_PORT": str(self.indexer_port),
            "RAG_RETRIEVER_PORT": str(self.retriever_port),
            "RAG_HOST": "127.0.0.1",
            "RAG_RERANKER_ADDR": "",
            "RAG_METRICS_ENABLED": "false",
            "RAG_LOG_JSON": "false",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            **config.store_env,
            **config.stack_env,
        }
        self.log_path = log_path
        self.log_start = log_path.stat().st_size if log_path.exists() else 0
        with log_path.open("a") as log:
            # A session of its own: the kill reaches every child (the Edge
            # optimizer child, say) as a power cut would.
            self.proc = subprocess.Popen(
                [sys.executable, "-m", CHILD_OF, str(os.getpid()), "services.stack"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.monotonic()

    @property
    def addrs(self) -> tuple[str, str]:
        return f"127.0.0.1:{self.indexer_port}", f"127.0.0.1:{self.retriever_port}"

    def ready(self) -> bool:
        return all(is_serving(addr, timeout_s=2.0) for addr in self.addrs)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it died by itself
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM (graceful), the group killed if that hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def own_log(self) -> str:
        with self.log_path.open(errors="replace") as log:
            log.seek(self.log_start)
            return log.read()

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = self.own_log()[-3000:]
            if self.proc.returncode == 2 and "cannot listen on" in tail:
                raise PortTaken(tail)
            raise CrashLoopError(
                f"the stack exited by itself with status {self.proc.returncode}:\n{tail}"
            )


class CrashLoop:
    """Start, kill, restart; the writer and reader run throughout."""

    def __init__(self, config: CrashLoopConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.figures = LoopFigures()
        self.endpoints = Endpoints()
        self.ledger = Ledger()
        self.writer = Writer(self.endpoints, self.ledger, seed=config.seed)
        self.reader = Reader(self.endpoints, self.ledger, seed=config.seed + 1)
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = config.log_dir / "stack.log"
        self.stack: StackProcess | None = None
        self._expected_startup_s = 10.0

    def start_stack(self) -> StackProcess:
        """A new process on fresh ports, published to the clients."""
        stack = StackProcess(self.config, self.log_path)
        self.endpoints.publish(*stack.addrs)
        return stack

    def wait_ready(self, stack: StackProcess, until: float) -> bool:
        """Poll readiness until `until` (monotonic); True once both serve."""
        while time.monotonic() < until:
            stack.check_alive()
            if stack.ready():
                return True
            time.sleep(0.25)
        return False

    def start_ready(self, timeout_s: float) -> StackProcess:
        """Start and wait until ready (a port taken by someone else meanwhile
        is a configuration error, status 2: started again on other ports)."""
        for _ in range(5):
            self.stack = stack = self.start_stack()
            try:
                if self.wait_ready(stack, stack.started + timeout_s):
                    return stack
            except PortTaken:
                self.figures.port_retries += 1
                continue
            raise CrashLoopError(
                f"a start was not ready after {timeout_s:.0f} s:\n" + stack.own_log()[-3000:]
            )
        raise CrashLoopError("five starts in a row found a port taken")

    def first_start(self) -> None:
        """Not killed: builds the model cache and an empty index."""
        stack = self.start_ready(2 * self.config.ready_timeout_s)
        self._expected_startup_s = time.monotonic() - stack.started
        self.endpoints.serving.set()

    def one_cycle(self, startup_kill: bool) -> None:
        """Kill the running stack (now, or after its uptime), restart it;
        a start-up kill lands at a random point of the expected start."""
        assert self.stack is not None
        if not startup_kill:
            time.sleep(self.rng.uniform(*self.config.uptime_s))
        self._kill()
        if startup_kill:
            self._kill_during_startup(self.start_stack())
        self._await_ready(self.start_ready(self.config.ready_timeout_s))

    def _kill_during_startup(self, stack: StackProcess) -> None:
        self.stack = stack
        delay = self.rng.uniform(0.1, 0.9) * self._expected_startup_s
        try:
            ready = self.wait_ready(stack, stack.started + delay)
        except PortTaken:
            self.figures.port_retries += 1
            return  # it died by itself: nothing to kill
        if ready:
            time.sleep(max(0.0, stack.started + delay - time.monotonic()))
        self._kill(during_startup=not ready)

    def _await_ready(self, stack: StackProcess) -> None:
        took = time.monotonic() - stack.started
        self.figures.restart_to_ready_s.append(took)
        self._expected_startup_s = took
        if "run_undone" in stack.own_log():
            self.figures.restarts_with_recovery += 1
        self.endpoints.serving.set()

    def _kill(self, during_startup: bool = False) -> None:
        assert self.stack is not None
        self.endpoints.serving.clear()
        # Taken before the signal: a write the kill cuts ends after it.
        self.figures.kill_times.append(time.monotonic())
        self.stack.kill()
        self.figures.kills += 1
        self.figures.kills_during_startup += during_startup

    def run(self) -> LoopFigures:
        """The loop; leaves a ready stack (restarted after the last kill)."""
        self.first_start()
        threads = [
            threading.Thread(target=client.run, daemon=True, name=type(client).__name__)
            for client in (self.writer, self.reader)
        ]
        for thread in threads:
            thread.start()
        began = time.monotonic()
        try:
            while not self._done(began):
                startup_kill = self.figures.kills % STARTUP_KILL_EVERY == STARTUP_KILL_EVERY - 1
                self.one_cycle(startup_kill)
        finally:
            self.writer.stop.set()
            self.reader.stop.set()
            for thread in threads:
                thread.join(timeout=120)
            self.figures.elapsed_s = time.monotonic() - began
        return self.figures

    def _done(self, began: float) -> bool:
        elapsed, kills = time.monotonic() - began, self.figures.kills
        if elapsed >= self.config.duration_s and kills >= self.config.min_kills:
            return True
        if elapsed >= self.config.time_cap_s:
            raise CrashLoopError(
                f"only {kills} kills in {elapsed:.0f} s (wanted {self.config.min_kills} "
                f"within the cap of {self.config.time_cap_s:.0f} s): restarts took "
                f"{self.figures.summary()['restart_to_ready_s']}; the machine is too slow "
                "or too loaded for this budget"
            )
        return False

    def close(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        self.endpoints.close()
