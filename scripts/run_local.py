"""`make run`: start the embedded stack, the Reranker and the Gateway as
separate processes, index this project's own docs/ as a demo corpus, print how
to query it, and stay up until Ctrl-C (then stop everything gracefully).

    python scripts/run_local.py            # run until Ctrl-C
    python scripts/run_local.py --check    # start, index, query once, stop (CI/smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from services.common.healthcheck import wait_until_serving

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PORTS = {"indexer": 50051, "retriever": 50052, "reranker": 50053, "gateway": 8080}
DEMO_QUERY = "How do I keep an ingest from leaving the two stores out of step?"


def service_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "RAG_DATA_DIR": str(data_dir),
            "RAG_LOG_JSON": "false",
            "HF_HUB_OFFLINE": "1",
            # The local demo page is public on this machine only (the gateway is
            # fail-closed by default; a real deployment sets its own origins).
            "RAG_GATEWAY_PUBLIC_ENABLED": "true",
            "RAG_GATEWAY_ALLOWED_ORIGINS": "http://localhost:8080,http://127.0.0.1:8080",
        }
    )
    return env


def start(name: str, module: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    log_file = (logs / f"{name}.log").open("wb")
    print(f"  starting {name:<9} (python -m {module}; log: {log_file.name})")
    return subprocess.Popen(
        [sys.executable, "-m", module], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
    )


def local(port: int) -> str:
    return f"localhost:{port}"


def wait_http_ok(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def index_docs() -> None:
    print("\nIndexing the demo corpus (this project's docs/) through the Indexer:")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "services.indexer.cli",
            "ingest",
            str(ROOT / "docs"),
            "--scope",
            "docs",
            "--base-url",
            "https://example.invalid/rag-services/docs/",
            "--sync",
        ],
        cwd=ROOT,
        check=True,
    )


def usage() -> str:
    grpcurl = BIN / "grpcurl"
    request = json.dumps({"query": DEMO_QUERY, "top_k": 3, "debug": True})
    body = json.dumps({"query": DEMO_QUERY, "top_k": 3})
    return f"""
The stack is up. Try it:

  {grpcurl} -plaintext localhost:{PORTS["retriever"]} list
  {grpcurl} -plaintext -d '{request}' \\
       localhost:{PORTS["retriever"]} rag.retriever.v1.Retriever/Retrieve
  {grpcurl} -plaintext localhost:{PORTS["indexer"]} rag.indexer.v1.Indexer/Stats
  curl -s -X POST localhost:{PORTS["gateway"]}/v1/search -H 'content-type: application/json' \\
       -H 'origin: http://localhost:8080' -d '{body}'
  open http://localhost:{PORTS["gateway"]}/   (the search page)

The Reranker reports NOT_SERVING when its cross-encoder cannot be loaded (no
model hub on this machine); Retrieve then returns the fused order and says so.
Ctrl-C stops everything.
"""


def smoke_query() -> None:
    body = json.dumps({"query": DEMO_QUERY, "top_k": 3}).encode()
    request = urllib.request.Request(
        f"http://localhost:{PORTS['gateway']}/v1/search",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "origin": "http://localhost:8080"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        result = json.load(reply)
    for hit in result.get("hits", []):
        print(f"  {hit.get('rank')}. {hit.get('title')} — {hit.get('heading_path')}")
    if not result.get("hits"):
        raise SystemExit("smoke query returned no hits")


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--check", action="store_true", help="start, index, query once, stop")
    args.add_argument("--data-dir", default=str(ROOT / ".data"))
    opts = args.parse_args()
    data_dir = Path(opts.data_dir)
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = service_env(data_dir)
    print("Starting the embedded stack:")
    procs = [
        start("stack", "services.stack", env, logs),
        start("reranker", "services.reranker", env, logs),
        start("gateway", "gateway", env, logs),
    ]
    try:
        if not (
            wait_until_serving(local(PORTS["indexer"]), timeout_s=180)
            and wait_until_serving(local(PORTS["retriever"]), timeout_s=60)
        ):
            raise SystemExit(f"the stack did not become ready; see {logs}/stack.log")
        if not wait_http_ok(f"http://localhost:{PORTS['gateway']}/readyz", 60):
            raise SystemExit(f"the gateway did not become ready; see {logs}/gateway.log")
        index_docs()
        if opts.check:
            smoke_query()
            return 0
        print(usage())
        # Blocked only now: children started earlier must not inherit the mask.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        return 0
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
