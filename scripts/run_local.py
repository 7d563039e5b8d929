"""`make run`: start the embedded stack, the Reranker and the Gateway as
separate processes, index this project's own docs/ as a demo corpus, print how
to query it, and stay up until Ctrl-C (then stop everything gracefully).

    python scripts/run_local.py            # run until Ctrl-C
    python scripts/run_local.py --check    # start, index, query once, stop (CI/smoke)

With `RAG_GATEWAY_REQUIRE_RELEASE=true` the gateway keeps public search closed
until the served index passes a release check: the launcher then starts as
usual, tells the gateway that is up but gated (`/readyz` says `"gated"`) from
one that is not up, and prints that the gate is closed and the exact
`release-check` command that opens it (golden queries for the demo corpus:
scripts/demo_golden.jsonl).

The children are watched the whole time (start-up, indexing, the query of
--check, and while up): when one dies, the launcher names it, says how it ended
and where its log is, shows the log's last lines, stops the others and exits
non-zero. It does not restart anything; scripts/supervisor.py says why.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.retriever.rerank_client import RERANKER_SERVICE
from services.runtime.healthcheck import wait_until_serving

try:
    from scripts.supervisor import ChildExited, ChildSpec, Supervisor
except ModuleNotFoundError:  # run as `python scripts/run_local.py`: scripts/ is sys.path[0]
    from supervisor import ChildExited, ChildSpec, Supervisor  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT_PORTS = {"indexer": 50051, "retriever": 50052, "reranker": 50053, "gateway": 8080}
# The services' default metrics listeners (docs/operations.md).
DEFAULT_METRICS_PORTS = {"gateway": 9464, "indexer": 9465, "retriever": 9466, "reranker": 9467}


def chosen_ports(
    defaults: dict[str, int], suffix: str, environ: Any = os.environ
) -> dict[str, int]:
    """Each service's port as its own setting (RAG_<SERVICE>_PORT, or
    _METRICS_PORT) chooses it: the launcher watches, and points the services
    at, the ports they really listen on. A value that is not a port keeps the
    default here; the service then refuses it at start, naming the variable."""
    ports = dict(defaults)
    for name in defaults:
        raw = str(environ.get(f"RAG_{name.upper()}_{suffix}", "")).strip()
        if raw.isdigit() and 0 < int(raw) < 65536:
            ports[name] = int(raw)
    return ports


PORTS = chosen_ports(DEFAULT_PORTS, "PORT")
METRICS_PORTS = chosen_ports(DEFAULT_METRICS_PORTS, "METRICS_PORT")
DEMO_QUERY = "How do I keep an ingest from leaving the two stores out of step?"
READY, GATED = "ready", "gated"  # the gateway's /readyz status words
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
POLL_S = 0.5


def page_origin() -> str:
    """The origin of the demo page, as a browser on this machine sends it."""
    return f"http://localhost:{PORTS['gateway']}"


def service_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    gateway = PORTS["gateway"]
    env.update(
        {
            "RAG_DATA_DIR": str(data_dir),
            "RAG_LOG_JSON": "false",
            "HF_HUB_OFFLINE": "1",
            # The local demo page is public on this machine only (the gateway is
            # fail-closed by default; a real deployment sets its own origins).
            "RAG_GATEWAY_PUBLIC_ENABLED": "true",
            "RAG_GATEWAY_ALLOWED_ORIGINS": f"{page_origin()},http://127.0.0.1:{gateway}",
        }
    )
    # Each service finds the others where they listen, unless told otherwise.
    env.setdefault("RAG_RERANKER_ADDR", local(PORTS["reranker"]))
    env.setdefault("RAG_RETRIEVER_ADDR", local(PORTS["retriever"]))
    return env


def module_child(name: str, module: str, env: dict[str, str], logs: Path) -> ChildSpec:
    return ChildSpec(
        name=name,
        argv=[sys.executable, "-m", module],
        log_path=logs / f"{name}.log",
        cwd=ROOT,
        env=env,
        label=f"python -m {module}",
    )


def service_children(env: dict[str, str], logs: Path) -> list[ChildSpec]:
    return [
        module_child("stack", "services.stack", env, logs),
        module_child("reranker", "services.reranker", env, logs),
        module_child("gateway", "gateway", env, logs),
    ]


def local(port: int) -> str:
    return f"localhost:{port}"


def gateway_state(base_url: str) -> str | None:
    """READY or GATED from the gateway's /readyz, or None while it is not up:
    200 is ready; a 503 that says "gated" is a gateway whose Retriever
    answers but whose release gate withholds public search; any other
    answer, or none, is not up (yet)."""
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as reply:
            return READY if reply.status == 200 else None
    except urllib.error.HTTPError as refused:
        try:
            body = json.loads(refused.read() or b"{}")
        except ValueError:
            return None
        return GATED if isinstance(body, dict) and body.get("status") == GATED else None
    except OSError:
        return None


def wait_for_gateway(
    base_url: str, timeout_s: float, check_alive: Callable[[], None]
) -> str | None:
    """`gateway_state` once it is up (ready or gated), None after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        check_alive()
        state = gateway_state(base_url)
        if state is not None:
            return state
        time.sleep(0.5)
    return None


def wait_until_ready(supervisor: Supervisor, logs: Path) -> str:
    """Wait for the services to serve; raises ChildExited as soon as one dies.
    The gateway's state: READY, or GATED (up, public search closed)."""
    alive = supervisor.check
    if not (
        wait_until_serving(local(PORTS["indexer"]), timeout_s=180, check_alive=alive)
        and wait_until_serving(local(PORTS["retriever"]), timeout_s=60, check_alive=alive)
    ):
        raise SystemExit(f"the stack did not become ready; see {logs}/stack.log")
    state = wait_for_gateway(f"http://localhost:{PORTS['gateway']}", 60, alive)
    if state is None:
        raise SystemExit(f"the gateway did not become ready; see {logs}/gateway.log")
    # Before the demo query, which is to be reranked: the model loads in seconds.
    reranker = local(PORTS["reranker"])
    if not wait_until_serving(reranker, RERANKER_SERVICE, timeout_s=180, check_alive=alive):
        print(f"The Reranker is not serving (see {logs}/reranker.log): answers are in fused order.")
    return state


def run_supervised(argv: Sequence[str], supervisor: Supervisor) -> None:
    """Run a one-off command (the ingest) to completion while watching the
    children: if one dies meanwhile, stop the command and raise ChildExited
    rather than let it talk to a dead service until its own timeouts."""
    proc = subprocess.Popen(list(argv), cwd=ROOT)
    try:
        returncode = wait_watching(proc, supervisor)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if returncode != 0:
        raise SystemExit(f"`{shlex.join(argv)}` failed with status {returncode}")


def wait_watching(proc: subprocess.Popen[bytes], supervisor: Supervisor) -> int:
    while True:
        try:
            return proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            supervisor.check()


@dataclass(frozen=True)
class DemoSource:
    """What `make run` indexes and release-checks: this project's docs/."""

    path: Path = ROOT / "docs"
    scope: str = "docs"
    base_url: str = "https://example.invalid/rag-services/docs/"
    golden: Path = ROOT / "scripts" / "demo_golden.jsonl"

    def options(self) -> list[str]:
        return [str(self.path), "--scope", self.scope, "--base-url", self.base_url]


def cli(indexer_addr: str, *args: str) -> list[str]:
    addr = ["--addr", indexer_addr] if indexer_addr else []
    return [sys.executable, "-m", "services.operator.cli", *addr, *args]


# The demo corpus (~570 chunks) is one streamed upsert: the CLI's default 600 s
# per RPC was not enough on a busy 2-core machine (9 of 11 documents after 10
# minutes, with tests running beside it), and a timed-out run is undone whole.
DEMO_INGEST_TIMEOUT_S = 3600


def index_command(indexer_addr: str = "", source: DemoSource = DemoSource()) -> list[str]:
    timeout = ["--timeout", str(DEMO_INGEST_TIMEOUT_S)]
    return cli(indexer_addr, *timeout, "ingest", *source.options(), "--sync")


def release_check_command(
    out_dir: Path,
    indexer_addr: str = "",
    retriever_addr: str = "",
    source: DemoSource = DemoSource(),
) -> list[str]:
    """The release check of what `index_command` indexed, with its golden
    queries; a pass opens the gate."""
    retriever = ["--retriever-addr", retriever_addr] if retriever_addr else []
    golden = ["--golden", str(source.golden), "--out", str(out_dir)]
    return cli(indexer_addr, "release-check", *source.options(), *golden, *retriever)


def moved_addresses() -> tuple[str, str]:
    """The Indexer's and the Retriever's addresses where their ports are not
    the defaults a command reaches on its own ("" where they are)."""

    def moved(name: str) -> str:
        return local(PORTS[name]) if PORTS[name] != DEFAULT_PORTS[name] else ""

    return moved("indexer"), moved("retriever")


def gate_notice(data_dir: Path) -> str:
    indexer, retriever = moved_addresses()
    command = shlex.join(release_check_command(data_dir / "release-checks", indexer, retriever))
    return f"""
Public search is CLOSED: RAG_GATEWAY_REQUIRE_RELEASE=true, and no release
check has passed for the index being served.
The gateway answers POST /v1/search with 503 release_not_current and its page
says search is closed, until a release check passes for the index being
served (the Indexer, the Retriever and grpcurl work as usual). Open it with
(`.venv/bin/rag-indexer release-check` is the same command):

  {command}

The gate opens within 2 s of a passing check; a later ingest closes it again
until that index is checked. Unset RAG_GATEWAY_REQUIRE_RELEASE to run ungated.
"""


def index_docs(supervisor: Supervisor) -> None:
    source = DemoSource()
    print(
        f"\nIndexing the demo corpus (this project's docs/, as scope {source.scope!r}) "
        "through the Indexer:"
    )
    run_supervised(index_command(local(PORTS["indexer"]), source), supervisor)


def usage() -> str:
    grpcurl = BIN / "grpcurl"
    request = json.dumps({"query": DEMO_QUERY, "top_k": 3, "debug": True})
    body = json.dumps({"query": DEMO_QUERY, "top_k": 3})
    other_metrics = ", ".join(f"{n} :{p}" for n, p in METRICS_PORTS.items() if n != "retriever")
    return f"""
The stack is up. Try it:

  {grpcurl} -plaintext localhost:{PORTS["retriever"]} list
  {grpcurl} -plaintext -d '{request}' \\
       localhost:{PORTS["retriever"]} rag.retriever.v1.Retriever/Retrieve
  {grpcurl} -plaintext localhost:{PORTS["indexer"]} rag.indexer.v1.Indexer/Stats
  curl -s -X POST localhost:{PORTS["gateway"]}/v1/search -H 'content-type: application/json' \\
       -H 'origin: {page_origin()}' -d '{body}'
  open http://localhost:{PORTS["gateway"]}/   (the search page)
  curl -s localhost:{METRICS_PORTS["retriever"]}/metrics   (Prometheus; {other_metrics})

The Reranker serves packaged:ms-marco-MiniLM-L-12-v2 (int8 ONNX; `make install`
fetched its files). It reports NOT_SERVING when the model cannot be loaded (its
log says why); Retrieve then returns the fused order and says so.
Ctrl-C stops everything. If a service dies, the launcher says which one, shows
the end of its log, stops the others and exits non-zero.
"""


def smoke_query() -> None:
    body = json.dumps({"query": DEMO_QUERY, "top_k": 3}).encode()
    request = urllib.request.Request(
        f"http://localhost:{PORTS['gateway']}/v1/search",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "origin": page_origin()},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        result = json.load(reply)
    for hit in result.get("hits", []):
        print(f"  {hit.get('rank')}. {hit.get('title')} — {hit.get('heading_path')}")
    rerank = result.get("rerank", {})
    print(
        f"  rerank: {rerank.get('code')}, {rerank.get('reranked')} of "
        f"{rerank.get('candidates')} candidates scored ({rerank.get('latency_ms', 0):.0f} ms)"
    )
    if not result.get("hits"):
        raise SystemExit("smoke query returned no hits")
    for degraded in result.get("degraded", []):
        print(f"  degraded: {degraded.get('component')}: {degraded.get('message')}")


def smoke_check(supervisor: Supervisor) -> None:
    """The --check query. A child found dead afterwards is the failure to
    report, even over the query's own error (which it most likely caused)."""
    try:
        smoke_query()
    finally:
        supervisor.check()


def gated_check(supervisor: Supervisor) -> None:
    """--check with the gate closed: the search is refused as gated (503
    release_not_current), which is what a closed gate must do."""
    try:
        smoke_query()
    except urllib.error.HTTPError as refused:
        code = json.loads(refused.read() or b"{}").get("error", {}).get("code")
        if (refused.code, code) != (503, "release_not_current"):
            raise SystemExit(f"the gated search answered {refused.code} {code}") from None
        print("  the search is refused with 503 release_not_current, as the gate is closed")
    else:
        raise SystemExit("the release gate is closed but the search was answered")
    finally:
        supervisor.check()


def wait_for_shutdown(supervisor: Supervisor) -> None:
    """Block until Ctrl-C or SIGTERM (return) or a child dies (ChildExited).

    The signals are blocked only now, so children started earlier do not
    inherit the mask. A child found dead while a stop signal is pending is part
    of that stop (Ctrl-C reaches the whole process group), not a crash."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    while signal.sigtimedwait(STOP_SIGNALS, POLL_S) is None:
        exited = supervisor.poll()
        if exited is not None and not signal.sigpending() & STOP_SIGNALS:
            raise ChildExited(exited)


def run(supervisor: Supervisor, check: bool, logs: Path) -> int:
    """Start the children, wait for them, index, then query once (--check) or
    stay up; a child's death at any point is reported and ends the run (1).
    A gateway up but gated (RAG_GATEWAY_REQUIRE_RELEASE) is up: the run goes
    on and says how to open the gate."""
    print("Starting the embedded stack:")
    try:
        supervisor.start()
        gateway = wait_until_ready(supervisor, logs)
        index_docs(supervisor)
        if not check:
            print(usage())
        if gateway == GATED:
            print(gate_notice(logs.parent))
        if check:
            (gated_check if gateway == GATED else smoke_check)(supervisor)
        else:
            wait_for_shutdown(supervisor)
        return 0
    except ChildExited as died:
        return supervisor.fail(died.child)
    finally:
        supervisor.stop_all()


def default_data_dir(environ: Any = os.environ) -> str:
    """RAG_DATA_DIR, as every service reads it (`RAG_DATA_DIR=/var/lib/rag-v2
    make run` re-indexes into a new folder: docs/indexing.md), else .data."""
    return str(environ.get("RAG_DATA_DIR", "")).strip() or str(ROOT / ".data")


def main(argv: Sequence[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--check", action="store_true", help="start, index, query once, stop")
    args.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="the index and the logs (default: RAG_DATA_DIR, else .data)",
    )
    opts = args.parse_args(argv)
    data_dir = Path(opts.data_dir)
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(service_children(service_env(data_dir), logs))
    return run(supervisor, opts.check, logs)


if __name__ == "__main__":
    sys.exit(main())
