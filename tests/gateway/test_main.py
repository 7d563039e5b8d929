"""`python -m gateway` starts through the recipe every service follows
(services.runtime.entry): it serves until SIGTERM and then exits cleanly, its
metrics listener with it; bad settings, or a port it cannot have, stop it at
start-up with exit status 2 and a message naming the variable."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.support import RetrieverServer, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(RAG_HOST="127.0.0.1", RAG_LOG_JSON="true", **extra)
    return env


async def test_sigterm_lets_the_in_flight_search_finish_then_exits_cleanly(
    retriever: RetrieverServer,
) -> None:
    retriever.servicer.delay_s = 1.0
    port, metrics_port = free_port(), free_port()
    env = _env(
        RAG_GATEWAY_PORT=str(port),
        RAG_GATEWAY_METRICS_PORT=str(metrics_port),
        RAG_RETRIEVER_ADDR=retriever.addr,
        RAG_GATEWAY_PUBLIC_ENABLED="true",
        RAG_GATEWAY_ALLOW_MISSING_ORIGIN="true",
    )
    process = _start(env)
    try:
        health = await asyncio.to_thread(
            _wait_for_health, f"http://127.0.0.1:{port}/healthz", process
        )
        async with httpx.AsyncClient(timeout=10) as client:
            metrics = await client.get(f"http://127.0.0.1:{metrics_port}/metrics")
            public_metrics = await client.get(f"http://127.0.0.1:{port}/metrics")
            search = asyncio.create_task(
                client.post(f"http://127.0.0.1:{port}/v1/search", json={"query": "rate limits"})
            )
            while retriever.servicer.calls == 0:
                await asyncio.sleep(0.02)
            process.send_signal(signal.SIGTERM)  # while the search is downstream
            response = await search
        output = (await asyncio.to_thread(process.communicate, None, 20))[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert health == {"status": "ok"}
    assert metrics.status_code == 200
    assert "gateway_search_requests_total" in metrics.text
    assert public_metrics.status_code == 404  # not on the public port
    assert response.status_code == 200
    assert process.returncode == 0
    assert "gateway_stopped" in output
    with pytest.raises(ConnectionRefusedError):  # the metrics listener stopped with it
        socket.create_connection(("127.0.0.1", metrics_port), timeout=2).close()


async def test_the_served_gateway_ignores_x_forwarded_for_from_loopback(
    retriever: RetrieverServer,
) -> None:
    """The process as deployed (uvicorn's own proxy-header handling would
    trust loopback): rotating X-Forwarded-For does not multiply the limit."""
    port = free_port()
    env = _env(
        RAG_GATEWAY_PORT=str(port),
        RAG_GATEWAY_METRICS_ENABLED="false",
        RAG_RETRIEVER_ADDR=retriever.addr,
        RAG_GATEWAY_PUBLIC_ENABLED="true",
        RAG_GATEWAY_ALLOW_MISSING_ORIGIN="true",
        RAG_GATEWAY_RATE_LIMIT="3/hour",
    )
    process = _start(env, quiet=True)
    try:
        await asyncio.to_thread(_wait_for_health, f"http://127.0.0.1:{port}/healthz", process)
        async with httpx.AsyncClient(timeout=10) as client:
            statuses = [
                (
                    await client.post(
                        f"http://127.0.0.1:{port}/v1/search",
                        json={"query": "rate limits"},
                        headers={"X-Forwarded-For": f"198.51.100.{i}"},
                    )
                ).status_code
                for i in range(12)
            ]
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 20)
    assert statuses == [200] * 3 + [429] * 9
    assert retriever.servicer.calls == 3


async def test_serves_liveness_without_its_retriever_and_exits_0_on_sigterm() -> None:
    """The Retriever's address is a closed port: the gateway still starts and
    answers /healthz (liveness), then stops gracefully on SIGTERM."""
    port = free_port()
    env = _env(
        RAG_GATEWAY_PORT=str(port),
        RAG_GATEWAY_METRICS_ENABLED="false",
        RAG_RETRIEVER_ADDR=f"127.0.0.1:{free_port()}",
    )
    process = _start(env)
    try:
        health = await asyncio.to_thread(
            _wait_for_health, f"http://127.0.0.1:{port}/healthz", process
        )
        process.send_signal(signal.SIGTERM)
        output = (await asyncio.to_thread(process.communicate, None, 20))[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert health == {"status": "ok"}
    assert process.returncode == 0, output
    events = ("gateway_starting", "server_started", "gateway_started", "services_ready")
    for event in (*events, "shutdown_requested", "gateway_stopped"):
        assert f'"event": "{event}"' in output, event
    # Started is said once the port is bound (a failed bind is the last line).
    assert output.index('"server_started"') < output.index('"gateway_started"')
    assert output.index("shutdown_requested") < output.index("gateway_stopped")


@pytest.mark.parametrize("setting", ["RAG_GATEWAY_PORT", "RAG_GATEWAY_METRICS_PORT"])
def test_a_taken_port_stops_start_up_naming_its_setting(setting: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = {"RAG_GATEWAY_PORT": str(free_port()), "RAG_GATEWAY_METRICS_PORT": str(free_port())}
        ports[setting] = str(taken.getsockname()[1])
        result = _run(_env(RAG_GATEWAY_METRICS_ENABLED="true", **ports))
    assert result.returncode == 2, result.stderr
    assert "configuration error:" in result.stderr
    assert setting in result.stderr
    assert "gateway_started" not in result.stdout + result.stderr  # it never started


def test_bad_settings_stop_start_up_naming_the_variable() -> None:
    result = _run(_env(RAG_GATEWAY_RATE_LIMIT="plenty"))
    assert result.returncode == 2
    assert "configuration error:" in result.stderr
    assert "RAG_GATEWAY_RATE_LIMIT" in result.stderr


def test_a_bad_tracing_setting_stops_start_up_naming_it() -> None:
    result = _run(_env(OTEL_TRACES_EXPORTER="zipkin"))
    assert result.returncode == 2
    assert "OTEL_TRACES_EXPORTER: 'zipkin'" in result.stderr


def _start(env: dict[str, str], quiet: bool = False) -> subprocess.Popen[bytes]:
    """`python -m gateway`, its output in `stdout` (both streams) unless `quiet`."""
    return subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else subprocess.STDOUT,
    )


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m gateway` expected to stop by itself (at start-up)."""
    return subprocess.run(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _wait_for_health(url: str, process: subprocess.Popen[bytes]) -> object:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(process.stdout.read().decode() if process.stdout else "exited")
        try:
            return httpx.get(url, timeout=1).json()
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(url)
