"""`python -m gateway` serves until SIGTERM and then exits cleanly, its
metrics listener with it; bad settings stop it at start-up with a message
naming the variable."""

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
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
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
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
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


def test_bad_settings_stop_start_up_naming_the_variable() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=_env(RAG_GATEWAY_RATE_LIMIT="plenty"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "RAG_GATEWAY_RATE_LIMIT" in result.stderr


def test_a_bad_tracing_setting_stops_start_up_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway"],
        cwd=ROOT,
        env=_env(OTEL_TRACES_EXPORTER="zipkin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "OTEL_TRACES_EXPORTER: 'zipkin'" in result.stderr


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
