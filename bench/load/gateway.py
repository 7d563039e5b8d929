"""Bounded load test of the gateway on loopback.

Starts `python -m gateway` as its own process (public, one allowed origin,
per-client limits) and drives it for a fixed time with three kinds of client,
each a distinct address via X-Forwarded-For (the gateway trusts loopback as
its proxy):

- `--clients` well-behaved clients, closed loop with a short random pause;
- `--greedy` clients that never pause and so run into their rate limit;
- one client on a foreign origin, a few requests a second.

Downstream is a stand-in Retriever (its own process) answering a fixed,
realistic response, so the numbers are the gateway's own cost, unless
`--retriever-addr` points at a real one (e.g. the one `make run` starts).
The clients speak plain HTTP/1.1 keep-alive over asyncio streams, so the load
generator stays much cheaper than the server it measures.

Records p50/p95/p99 latency per outcome and checks that no 5xx occurred other
than intended 503s, writing bench/results/gateway_load.json.

    python -m bench.load.gateway                   # 45 s, 32 + 2 + 1 clients
    python -m bench.load.gateway --duration 10     # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import grpc
import httpx
import psutil

from bench.common.paths import BENCHMARKS_MD, RESULTS_DIR, ROOT
from bench.common.processes import free_port
from bench.load.keepalive_client import KeepAliveClient
from bench.reports.page import write_report
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.runtime.server import GrpcServer, ServerOptions, run_until_signal

RESULTS = RESULTS_DIR / "gateway_load.json"
ORIGIN = "http://bench.local"
FOREIGN_ORIGIN = "http://elsewhere.example"
QUERIES = (
    "what does status 429 mean",
    "how is the daily budget reset",
    "which port does the gateway listen on",
    "reciprocal rank fusion k=60",
    "chunkSize=800 overlap",
    "how do I restore a backup",
)
INTENDED_5XX = {503}  # public switch off, breaker open, limiter unavailable


class FixedRetriever(retriever_pb2_grpc.RetrieverServicer):
    """Stand-in Retriever for the benchmark: one prebuilt five-hit response, so
    the measured time is the gateway's (gates, mapping, HTTP) and not search."""

    def __init__(self) -> None:
        hits, citations = [], []
        for n in range(1, 6):
            url = f"https://docs.example/page-{n}"
            hits.append(
                pb.Hit(
                    chunk_id=f"c{n}",
                    doc_id=f"d{n}",
                    url=url,
                    title=f"Page {n}",
                    heading_path=f"Page {n} > Section",
                    text="Some passage text. " * 40,
                    rank=n,
                    score=1 / n,
                    fused_score=1 / (60 + n),
                    channels=[pb.ChannelMatch(channel=pb.CHANNEL_VECTOR, rank=n, score=0.5)],
                )
            )
            citations.append(pb.Citation(number=n, chunk_id=f"c{n}", doc_id=f"d{n}", url=url))
        self.response = pb.RetrieveResponse(
            hits=hits,
            intent=pb.INTENT_SITE_SEARCH,
            rerank=pb.RerankOutcome(used=False, fallback=True, reason="benchmark"),
            evidence=pb.Evidence(text="[1] ..." * 200, citations=citations, chars=1400),
        )

    async def Retrieve(
        self, request: pb.RetrieveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetrieveResponse:
        return self.response


@dataclass
class Tally:
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[int] = field(default_factory=Counter)
    by_kind: Counter[tuple[str, str]] = field(default_factory=Counter)
    transport_errors: int = 0

    def record(self, kind: str, outcome: str, status: int, ms: float) -> None:
        self.latencies_ms[outcome].append(ms)
        self.statuses[status] += 1
        self.by_kind[kind, outcome] += 1


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    index = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def summarize(values: list[float]) -> dict[str, float | int]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": round(percentile(ordered, 50), 2),
        "p95": round(percentile(ordered, 95), 2),
        "p99": round(percentile(ordered, 99), 2),
        "max": round(ordered[-1], 2) if ordered else float("nan"),
        "mean": round(sum(ordered) / len(ordered), 2) if ordered else float("nan"),
    }


async def client_loop(
    url: str,
    stop_at: float,
    tally: Tally,
    *,
    kind: str,
    address: str,
    origin: str,
    pause_s: tuple[float, float],
) -> None:
    parsed = urlsplit(url)
    client = KeepAliveClient(parsed.hostname or "127.0.0.1", parsed.port or 80)
    headers = {"Origin": origin, "X-Forwarded-For": address}
    rng = random.Random(address)
    try:
        while time.perf_counter() < stop_at:
            body = json.dumps({"query": rng.choice(QUERIES), "top_k": 5}).encode()
            started = time.perf_counter()
            try:
                status, payload = await client.post_json(parsed.path, body, headers)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                tally.transport_errors += 1
                await client.close()
                continue
            ms = (time.perf_counter() - started) * 1000
            tally.record(kind, outcome_of(status, payload), status, ms)
            if pause_s[1] > 0:
                await asyncio.sleep(rng.uniform(*pause_s))
    finally:
        await client.close()


def outcome_of(status: int, payload: bytes) -> str:
    if status == 200:
        return "allowed"
    try:
        return str(json.loads(payload)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"http_{status}"


def start_gateway(
    args: argparse.Namespace, retriever_addr: str, port: int, metrics_port: int
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_GATEWAY_")}
    env.update(
        RAG_HOST="127.0.0.1",
        RAG_LOG_JSON="true",
        RAG_GATEWAY_PORT=str(port),
        # /metrics has its own listener (never the public port).
        RAG_GATEWAY_METRICS_PORT=str(metrics_port),
        RAG_RETRIEVER_ADDR=retriever_addr,
        RAG_GATEWAY_PUBLIC_ENABLED="true",
        RAG_GATEWAY_ALLOWED_ORIGINS=ORIGIN,
        RAG_GATEWAY_RATE_LIMIT=args.rate_limit,
        RAG_GATEWAY_DAILY_BUDGET="100000000",
        RAG_GATEWAY_FORWARDED_ALLOW_IPS="127.0.0.1",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_ready(url: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError(f"gateway at {url} not ready")


async def scrape_outcomes(url: str) -> dict[str, float]:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{url}/metrics")).text
    pattern = r'^gateway_search_requests_total\{outcome="([a-z_]+)"\} (\S+)$'
    return {m[0]: float(m[1]) for m in re.findall(pattern, text, flags=re.MULTILINE) if float(m[1])}


async def drive(args: argparse.Namespace, url: str) -> tuple[Tally, float]:
    tally = Tally()
    search = f"{url}/v1/search"
    started = time.perf_counter()
    stop_at = started + args.duration
    # (kind, address, origin, pause range): well-behaved, greedy, foreign origin.
    clients = [
        ("well_behaved", f"10.1.0.{i}", ORIGIN, (0.0, args.max_pause_s))
        for i in range(1, args.clients + 1)
    ]
    clients += [("greedy", f"10.2.0.{i}", ORIGIN, (0.0, 0.0)) for i in range(1, args.greedy + 1)]
    clients.append(("foreign_origin", "10.3.0.1", FOREIGN_ORIGIN, (0.2, 0.4)))
    await asyncio.gather(
        *(
            client_loop(
                search, stop_at, tally, kind=kind, address=address, origin=origin, pause_s=pause
            )
            for kind, address, origin, pause in clients
        )
    )
    return tally, time.perf_counter() - started


async def serve_stand_in(port: int) -> None:
    """Run the stand-in Retriever until terminated (its own process, so the
    load generator's event loop never delays a downstream answer)."""
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=port), ["rag.retriever.v1.Retriever"])
    retriever_pb2_grpc.add_RetrieverServicer_to_server(FixedRetriever(), server.server)
    await server.start()
    await server.set_serving(True)
    await run_until_signal([server])


def start_stand_in() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.load.gateway", "--stand-in-port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, f"127.0.0.1:{port}"


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    processes: list[subprocess.Popen[bytes]] = []
    retriever_addr = args.retriever_addr
    if not retriever_addr:
        stand_in, retriever_addr = start_stand_in()
        processes.append(stand_in)
    port, metrics_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    processes.append(start_gateway(args, retriever_addr, port, metrics_port))
    try:
        await wait_ready(url)
        watched = {"gateway": psutil.Process(processes[-1].pid), "load_generator": psutil.Process()}
        before = {name: cpu_seconds(proc) for name, proc in watched.items()}
        load_before = os.getloadavg()[0]
        tally, elapsed = await drive(args, url)
        cpu = {name: cpu_seconds(proc) - before[name] for name, proc in watched.items()}
        server_outcomes = await scrape_outcomes(f"http://127.0.0.1:{metrics_port}")
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)
    result = report(args, tally, elapsed, server_outcomes, retriever_addr)
    result["cpu"] = {
        "load_average_1m_at_start": round(load_before, 2),
        **{f"{name}_cores_busy": round(seconds / elapsed, 2) for name, seconds in cpu.items()},
        "gateway_cpu_ms_per_request": round(cpu["gateway"] * 1000 / max(1, result["requests"]), 3),
    }
    return result


def report(
    args: argparse.Namespace, tally: Tally, elapsed: float, server: dict[str, float], addr: str
) -> dict[str, Any]:
    everything = [ms for values in tally.latencies_ms.values() for ms in values]
    unexpected = {s: n for s, n in tally.statuses.items() if s >= 500 and s not in INTENDED_5XX}
    return {
        "benchmark": "gateway_load",
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "config": {
            "duration_s": args.duration,
            "clients": args.clients,
            "greedy_clients": args.greedy,
            "foreign_origin_clients": 1,
            "max_pause_s": args.max_pause_s,
            "rate_limit_per_client": args.rate_limit,
            "retriever": "stand-in (fixed response)" if not args.retriever_addr else addr,
        },
        "elapsed_s": round(elapsed, 2),
        "requests": len(everything),
        "throughput_rps": round(len(everything) / elapsed, 1),
        "allowed_rps": round(len(tally.latencies_ms.get("allowed", [])) / elapsed, 1),
        "by_outcome": {k: len(v) for k, v in sorted(tally.latencies_ms.items())},
        "by_client_kind": {
            kind: {o: n for (k, o), n in sorted(tally.by_kind.items()) if k == kind}
            for kind in sorted({k for k, _ in tally.by_kind})
        },
        "by_status": {str(k): v for k, v in sorted(tally.statuses.items())},
        "latency_ms": {
            "all": summarize(everything),
            **{k: summarize(v) for k, v in sorted(tally.latencies_ms.items())},
        },
        "server_counted_outcomes": server,
        "unexpected_5xx": unexpected,
        "transport_errors": tally.transport_errors,
        "ok": not unexpected and tally.transport_errors == 0,
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\ngateway load: {result['elapsed_s']} s, {result['requests']} requests, "
        f"{result['throughput_rps']} req/s ({result['allowed_rps']} allowed/s)"
    )
    print(f"{'outcome':<20}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for outcome, stats in result["latency_ms"].items():
        print(
            f"{outcome:<20}{stats['count']:>8}{stats['p50']:>10}{stats['p95']:>10}"
            f"{stats['p99']:>10}{stats['max']:>10}"
        )
    for kind, outcomes in result["by_client_kind"].items():
        print(f"  {kind:<16} {outcomes}")
    print(f"status codes: {result['by_status']}   transport errors: {result['transport_errors']}")
    cpu = result["cpu"]
    print(
        f"cores busy: gateway {cpu['gateway_cores_busy']}, load generator "
        f"{cpu['load_generator_cores_busy']}; gateway CPU per request "
        f"{cpu['gateway_cpu_ms_per_request']} ms; machine load average at start "
        f"{cpu['load_average_1m_at_start']}"
    )
    verdict = "OK" if result["ok"] else f"FAILED: unexpected 5xx {result['unexpected_5xx']}"
    print(f"no 5xx other than intended 503s: {verdict}\nwritten: {RESULTS}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=45.0, help="seconds of load (≤ 120)")
    parser.add_argument("--clients", type=int, default=32, help="well-behaved clients")
    parser.add_argument("--greedy", type=int, default=2, help="clients that never pause")
    parser.add_argument(
        "--max-pause-s",
        type=float,
        default=0.1,
        help="well-behaved clients pause uniformly up to this between requests",
    )
    parser.add_argument(
        "--rate-limit",
        default="40/second;1800/minute",
        help="per-client limit given to the gateway",
    )
    parser.add_argument("--retriever-addr", default="", help="a real Retriever instead")
    parser.add_argument("--stand-in-port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.duration <= 120:
        parser.error("--duration must be between 1 and 120 seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.stand_in_port:
        asyncio.run(serve_stand_in(args.stand_in_port))
        return 0
    command = shlex.join(["python", "-m", "bench.load.gateway", *argv])
    result = {"command": command, **asyncio.run(run(args))}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print_table(result)
    write_report(RESULTS_DIR, BENCHMARKS_MD)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
