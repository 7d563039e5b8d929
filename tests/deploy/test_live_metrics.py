"""The metrics contract (tests/deploy/metrics_contract.py: what the alert
rules and the dashboard query) against the running services: every real app,
each on its own metrics listener, after a search through the gateway and an
ingest through the Indexer, serves every metric the contract says it serves,
with the contract's label names and values and nothing outside it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.embedding.embedder import Embedder
from services.reranker.app import RerankerApp
from services.runtime.observability.telemetry import Telemetry
from tests.deploy.metrics_contract import CONTRACT, EXPORTED_BY, exposed_names
from tests.gateway.support import ALLOWED_ORIGIN, gateway_settings, serve_gateway
from tests.reranker.stack import start_reranked_stack
from tests.support.stack import BackgroundStack
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration

# A histogram's or a counter's own label (`le`), and prometheus_client's
# creation-time series (`x_created`), are not part of the contract.
HISTOGRAM_LABEL = "le"


class Running:
    def __init__(self, stack: BackgroundStack, reranker: RerankerApp) -> None:
        self.stack, self.reranker = stack, reranker


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("live-metrics")
    stack, reranker = start_reranked_stack(
        root,
        embedder,
        str(build_tiny_cross_encoder(root / "model")),
        telemetry=(Telemetry("indexer", metrics_port=0), Telemetry("retriever", metrics_port=0)),
        reranker_telemetry=Telemetry("reranker", metrics_port=0),
    )
    yield Running(stack, reranker)
    stack.stop()


def served(text: str) -> dict[str, list[dict[str, str]]]:
    """Series name → the label sets it is served with."""
    series: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


def check_against_contract(service: str, text: str) -> None:
    series = served(text)
    for name in EXPORTED_BY[service]:
        metric = CONTRACT[name]
        for exposed in exposed_names(name, metric):
            assert exposed in series, f"{service} does not serve {exposed}"
            for labels in series[exposed]:
                labels.pop(HISTOGRAM_LABEL, None)
                assert set(labels) == set(metric.labels), (service, exposed, labels)
                for label, allowed in metric.labels.items():
                    assert allowed is None or labels[label] in allowed, (exposed, labels)


async def scrape(url: str | None) -> str:
    assert url, "the metrics listener is off"
    async with httpx.AsyncClient(timeout=10) as client:
        reply = await client.get(url)
    reply.raise_for_status()
    return reply.text


async def test_every_service_serves_the_metrics_deploy_queries(running: Running) -> None:
    settings = gateway_settings(running.stack.retriever_addr, gateway_request_deadline_s=10.0)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=30) as client:
        reply = await client.post(
            f"{gw.url}/v1/search",
            json={"query": "what should clients do after status 429"},
            headers={"origin": ALLOWED_ORIGIN},
        )
        assert reply.status_code == 200 and reply.json()["rerank"]["used"]
        check_against_contract("gateway", await scrape(gw.metrics_url))
    apps = running.stack.stack
    assert apps is not None
    check_against_contract("indexer", await scrape(apps.indexer.telemetry.metrics_url))
    check_against_contract("retriever", await scrape(apps.retriever.telemetry.metrics_url))
    check_against_contract("reranker", await scrape(running.reranker.telemetry.metrics_url))
