"""Retriever → Reranker over mutual TLS with caller identity: the Retriever's
RerankClient, configured from its settings, is the only client that gets
scores; one without a certificate or a token is refused, and the refusal
reaches the Retriever as Unavailable (it then falls back to fused order)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from services.core.errors import Unavailable
from services.reranker.app import RerankerApp
from services.retriever.rerank_client import RerankClient
from services.retriever.settings import RetrieverSettings
from services.runtime.security.client import ClientSecurity
from tests.reranker.test_servicer import settings_for
from tests.reranker.texts import QUERY, passages
from tests.support.certs import Pki

pytestmark = pytest.mark.integration

TOKEN = "retriever-to-reranker-0123456789"


def callers() -> str:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    entry = {"name": "retriever", "roles": ["reader"], "scopes": ["*"], "token_sha256": [digest]}
    return json.dumps([entry])


async def test_the_retriever_reaches_a_mutual_tls_reranker_with_its_token(
    tiny_model_dir: Path, onnx_cache: Path, tmp_path: Path
) -> None:
    pki = Pki.create(tmp_path)
    server = pki.server_settings(require_client_cert=True) | {"auth_callers": callers()}
    app = RerankerApp(settings_for(tiny_model_dir, onnx_cache, **server))
    port = await app.open_port()
    await app.load_model()
    retriever_cert = pki.issue("retriever.rag")
    configured = RetrieverSettings(
        reranker_addr=f"localhost:{port}",
        reranker_tls_ca_file=pki.ca_file,
        reranker_tls_cert_file=retriever_cert.cert,
        reranker_tls_key_file=retriever_cert.key,
        reranker_token=TOKEN,
    )
    security = ClientSecurity.from_settings(configured, "reranker")
    texts = passages(4)
    clients = {
        "configured": RerankClient(configured.reranker_addr, security=security),
        "no token": RerankClient(configured.reranker_addr, security=ClientSecurity(security.tls)),
        "no certificate": RerankClient(
            configured.reranker_addr,
            security=ClientSecurity(type(security.tls)(ca_file=pki.ca_file), security.token),
        ),
        "plaintext": RerankClient(configured.reranker_addr),
    }
    try:
        reply = await clients["configured"].rerank(QUERY, texts, timeout_s=30)
        assert len(reply.scores) == len(texts)
        for name in ("no token", "no certificate", "plaintext"):
            with pytest.raises(Unavailable) as err:
                await clients[name].rerank(QUERY, texts, timeout_s=30)
            expected = "UNAUTHENTICATED" if name == "no token" else "UNAVAILABLE"
            assert expected in str(err.value), name
    finally:
        for client in clients.values():
            await client.close()
        await app.stop()
