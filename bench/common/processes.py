"""The real service processes on free ports, started exactly as an operator
starts them (`python -m services.stack`, `python -m services.reranker`) and
configured by environment variables only, so what is measured is the deployed
code path, gRPC included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import psutil

from bench.common.memory_cap import joining
from bench.common.paths import ROOT
from rag_client import CallError, RerankerClient
from rag_client.settings import ClientSettings, RetryPolicy
from services.reranker.scorer import LOADING
from services.runtime.healthcheck import wait_until_serving


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int, taken: Collection[int] = ()) -> list[int]:
    """`count` distinct free ports, none of them in `taken`. The sockets stay
    bound until all are chosen: one at a time, the system may hand the same
    port out twice (two listeners of one stack then collide: "Address
    already in use")."""
    with contextlib.ExitStack() as held:
        chosen: list[int] = []
        while len(chosen) < count:
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            if port not in taken:
                chosen.append(port)
        return chosen


class ServiceProcess:
    """One service as its own OS process, logging to `log_path`, stopped with
    SIGTERM (graceful shutdown) and killed only if that hangs."""

    def __init__(
        self,
        module: str,
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path = ROOT,
        cgroup_procs: Path | None = None,
    ) -> None:
        """`cwd`: the source tree to run from (another revision's worktree, say).
        `cgroup_procs`: a cgroup's `cgroup.procs` the process joins before
        the interpreter starts (bench.common.memory_cap.ChildMemoryCap)."""
        self.module = module
        self.cwd = cwd
        self.cgroup_procs = cgroup_procs
        self.env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",  # the log file shows progress as it happens
            "RAG_LOG_JSON": "false",
            **env,
        }
        self.log_path = log_path
        self._log: TextIO | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            self._argv(),
            cwd=self.cwd,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def _argv(self) -> list[str]:
        argv = [sys.executable, "-m", self.module]
        return argv if self.cgroup_procs is None else joining(self.cgroup_procs, argv)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_health(self, addr: str, service: str = "", timeout_s: float = 600) -> bool:
        """True once `addr` reports SERVING; False if it answers but stays
        NOT_SERVING until the timeout. Raises if the process dies first.
        Ten minutes: on 2 cores shared by several runs, loading the model
        alone has taken over three."""
        return wait_until_serving(addr, service, timeout_s, check_alive=self._raise_if_dead)

    def _raise_if_dead(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.module} exited with {self.proc.returncode}:\n{tail}")

    def memory(self) -> dict[str, float]:
        """Resident memory now and its peak (VmHWM), in MiB, and how much of
        it is the process's own (anonymous) rather than file pages it maps
        (store files: the kernel can drop those under memory pressure)."""
        info = psutil.Process(self.pid).memory_info()
        peak_kib = _proc_status_kib(self.pid, "VmHWM")
        return {
            "rss_mib": round(info.rss / 2**20, 1),
            "peak_rss_mib": round(peak_kib / 1024, 1),
            "anon_mib": round(_proc_status_kib(self.pid, "RssAnon") / 1024, 1),
            "file_mib": round(_proc_status_kib(self.pid, "RssFile") / 1024, 1),
        }

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None


def _proc_status_kib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return float(line.split()[1])
    return 0.0


@dataclass
class Stack:
    """`python -m services.stack` (Indexer + Retriever) on free ports."""

    process: ServiceProcess
    indexer_addr: str
    retriever_addr: str

    @classmethod
    def start(
        cls,
        data_dir: Path,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
        log_name: str = "stack.log",
        cgroup_procs: Path | None = None,
    ) -> Stack:
        # Ports the caller chose already (metrics listeners, say) are not reused.
        taken = {int(v) for k, v in (env or {}).items() if k.endswith("_PORT") and v.isdigit()}
        indexer_port, retriever_port = free_ports(2, taken)
        ports = {"RAG_INDEXER_PORT": indexer_port, "RAG_RETRIEVER_PORT": retriever_port}
        full_env = {
            "RAG_DATA_DIR": str(data_dir),
            "RAG_STORE_MODE": "embedded",
            "RAG_HOST": "127.0.0.1",
            "RAG_RERANKER_ADDR": "",
            **{k: str(v) for k, v in ports.items()},
            **(env or {}),
        }
        process = ServiceProcess(
            "services.stack", full_env, log_dir / log_name, cwd, cgroup_procs
        ).start()
        stack = cls(
            process,
            f"127.0.0.1:{ports['RAG_INDEXER_PORT']}",
            f"127.0.0.1:{ports['RAG_RETRIEVER_PORT']}",
        )
        try:
            for addr in (stack.indexer_addr, stack.retriever_addr):
                if not process.wait_health(addr):
                    raise RuntimeError(f"stack at {addr} never became SERVING")
        except BaseException:
            process.stop()
            raise
        return stack

    def stop(self) -> None:
        self.process.stop()


@dataclass
class Reranker:
    """`python -m services.reranker` on a free port; `loaded`/`reason` say
    whether its model could be loaded (else it stays NOT_SERVING)."""

    process: ServiceProcess
    addr: str
    loaded: bool
    reason: str
    model: str

    @classmethod
    def start(
        cls, model: str, log_dir: Path, env: Mapping[str, str] | None = None, timeout_s: float = 240
    ) -> Reranker:
        port = free_port()
        full_env = {
            "RAG_RERANKER_PORT": str(port),
            "RAG_RERANK_MODEL": model,
            "RAG_HOST": "127.0.0.1",
            **(env or {}),
        }
        process = ServiceProcess("services.reranker", full_env, log_dir / "reranker.log").start()
        addr = f"127.0.0.1:{port}"
        try:
            return cls._await_model(process, addr, model, timeout_s)
        except BaseException:
            process.stop()
            raise

    @classmethod
    def _await_model(
        cls, process: ServiceProcess, addr: str, model: str, timeout_s: float
    ) -> Reranker:
        """SERVING, or the reason from Info once loading has given up."""
        deadline = time.monotonic() + timeout_s
        settings = ClientSettings(addr, retry=RetryPolicy(max_attempts=1))
        with RerankerClient(settings) as client:
            while time.monotonic() < deadline:
                if process.wait_health(addr, timeout_s=2):
                    return cls(process, addr, True, "", model)
                try:
                    info = client.info(deadline=2)
                except CallError:
                    continue
                if info.reason and info.reason != LOADING:  # still loading: wait on
                    return cls(process, addr, False, info.reason, model)
        return cls(process, addr, False, f"not SERVING after {timeout_s:.0f} s", model)

    def stop(self) -> None:
        self.process.stop()


def start_reranker(
    model: str, log_dir: Path, env: Mapping[str, str] | None = None
) -> tuple[Reranker | None, str]:
    """A serving Reranker of `model`, or None and why not ("" model: not
    asked for). Its settings come from the calling shell, then `env`."""
    if not model:
        return None, "--no-rerank"
    reranker = Reranker.start(model, log_dir, env)
    if reranker.loaded:
        return reranker, ""
    reranker.stop()
    return None, f"no reranker serving ({model}): {reranker.reason}"
