"""The gateway holds a reader credential for the Retriever: the real stack
with callers configured, the real gateway with its token. Its scope comes
from the Retriever's callers list; another scope is 403 with a fixed
message; without the token the backend is unavailable to it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.embedding.embedder import Embedder
from tests.gateway.support import ALLOWED_ORIGIN, gateway_settings, serve_gateway
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

GATEWAY_TOKEN = "gateway-reader-token-0123456789"
WRITER_TOKEN = "writer-token-for-seeding-012345"


def callers() -> str:
    def digest(token: str) -> list[str]:
        return [hashlib.sha256(token.encode()).hexdigest()]

    return json.dumps(
        [
            {
                "name": "gateway",
                "roles": ["reader"],
                "scopes": ["alpha"],
                "token_sha256": digest(GATEWAY_TOKEN),
            },
            {
                "name": "seed",
                "roles": ["writer"],
                "scopes": ["*"],
                "token_sha256": digest(WRITER_TOKEN),
            },
        ]
    )


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    auth = {"auth_callers": callers()}
    stack = BackgroundStack(
        tmp_path_factory.mktemp("gw-auth"), embedder, retriever=auth, indexer=auth
    )
    stack.start()
    docs = [
        ipb.Document(
            doc_id=f"{s}.md", scope_id=s, title=s, text=f"# {s}\n\nThe {s} ledger uses port 7311."
        )
        for s in ("alpha", "beta")
    ]
    seed = [("authorization", f"Bearer {WRITER_TOKEN}")]
    stack.indexer.Upsert(ipb.UpsertRequest(documents=docs), metadata=seed, timeout=120)
    yield stack
    stack.stop()


async def search(stack: BackgroundStack, token: str | None, **body: Any) -> httpx.Response:
    settings = gateway_settings(stack.retriever_addr, retriever_token=token)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=30) as client:
        return await client.post(
            f"{gw.url}/v1/search",
            json={"query": "ledger port 7311", **body},
            headers={"origin": ALLOWED_ORIGIN},
        )


async def test_the_gateway_searches_the_scope_its_credential_holds(stack: BackgroundStack) -> None:
    reply = await search(stack, GATEWAY_TOKEN)
    assert reply.status_code == 200, reply.text
    assert {hit["scope_id"] for hit in reply.json()["hits"]} == {"alpha"}


async def test_another_scope_is_forbidden_without_naming_what_the_gateway_holds(
    stack: BackgroundStack,
) -> None:
    reply = await search(stack, GATEWAY_TOKEN, scope={"scope_id": "beta"})
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "scope_not_allowed"
    assert "alpha" not in reply.text and "gateway" not in reply.json()["error"]["message"]


async def test_without_its_token_the_backend_is_unavailable(stack: BackgroundStack) -> None:
    reply = await search(stack, None)
    assert reply.status_code == 502
    assert reply.json()["error"]["code"] == "upstream_unavailable"
