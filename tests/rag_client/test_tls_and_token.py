"""The client against the real stack under TLS with callers: the Indexer
under server TLS, the Retriever under mutual TLS, every call with a bearer
token. The right settings are accepted and give real results; a wrong token,
a missing role or a wrong certificate name are the client's exceptions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import grpc
import pytest

from rag_client import (
    AsyncRetrieverClient,
    ClientSettings,
    IndexerClient,
    PermissionDenied,
    RetrieverClient,
    RetryPolicy,
    TlsSettings,
    Unauthenticated,
    Unavailable,
    indexer_pb2,
)
from services.embedding.embedder import Embedder
from tests.support.certs import Pki
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

TOKENS = {"reader": "tok-client-reader-0123456789ab", "writer": "tok-client-writer-0123456789ab"}
PAGE = indexer_pb2.Document(
    doc_id="ledger.md",
    scope_id="docs",
    locale="en",
    title="Ledger",
    text="# Ledger\n\nThe ledger service listens on port 7311 and compacts nightly.",
)


def callers() -> str:
    roles = {"reader": ["reader"], "writer": ["writer"]}
    return json.dumps(
        [
            {
                "name": name,
                "roles": roles[name],
                "scopes": ["docs"],
                "token_sha256": [hashlib.sha256(token.encode()).hexdigest()],
            }
            for name, token in TOKENS.items()
        ]
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("client-pki"))


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, pki: Pki
) -> Iterator[BackgroundStack]:
    auth = {"auth_callers": callers()}
    indexer = pki.server_settings(require_client_cert=False) | auth
    retriever = pki.server_settings(require_client_cert=True) | auth
    stack = BackgroundStack(
        tmp_path_factory.mktemp("client-tls"), embedder, indexer=indexer, retriever=retriever
    ).start()
    yield stack
    stack.stop()


def settings(target: str, pki: Pki, who: str = "reader", **fields: object) -> ClientSettings:
    pair = pki.issue("client.rag")  # shown to the Retriever, which asks for one
    tls = TlsSettings(ca_file=pki.ca_file, cert_file=pair.cert, key_file=pair.key)
    return ClientSettings(target, tls=tls, token=TOKENS[who], timeout=60.0, **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module", autouse=True)
def indexed(stack: BackgroundStack, pki: Pki) -> None:
    with IndexerClient(settings(stack.indexer_addr, pki, "writer")) as indexer:
        assert indexer.upsert([PAGE], dry_run=True).counts.added == 1
        assert indexer.upsert([PAGE]).counts.added == 1


def test_tls_and_a_token_are_accepted_and_find_the_page(stack: BackgroundStack, pki: Pki) -> None:
    with RetrieverClient(settings(stack.retriever_addr, pki)) as client:
        reply = client.retrieve("which port does the ledger listen on", top_k=1)
        status = client.index_status()
    assert reply.hits[0].doc_id == "ledger.md" and "port 7311" in reply.hits[0].text
    assert status.committed_generation >= 1


def test_a_wrong_token_is_unauthenticated(stack: BackgroundStack, pki: Pki) -> None:
    wrong = settings(stack.retriever_addr, pki)
    wrong = ClientSettings(wrong.target, tls=wrong.tls, token="tok-not-a-caller-0123456789")
    with RetrieverClient(wrong) as client, pytest.raises(Unauthenticated) as err:
        client.retrieve("ledger")
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert "unknown or revoked token" in err.value.details and err.value.attempts == 1


def test_a_token_without_the_role_is_permission_denied(stack: BackgroundStack, pki: Pki) -> None:
    reader = IndexerClient(settings(stack.indexer_addr, pki, "reader"))
    with reader, pytest.raises(PermissionDenied) as err:
        reader.upsert([PAGE])
    assert "writer role" in err.value.details


def test_the_server_name_setting_is_what_the_certificate_is_checked_against(
    stack: BackgroundStack, pki: Pki
) -> None:
    # The server certificate names localhost and 127.0.0.1, not retriever.rag.
    base = settings(stack.retriever_addr, pki)
    assert base.tls is not None
    tls = TlsSettings(
        ca_file=base.tls.ca_file,
        cert_file=base.tls.cert_file,
        key_file=base.tls.key_file,
        server_name="retriever.rag",
    )
    once = RetryPolicy(max_attempts=1)
    bad = ClientSettings(base.target, tls=tls, token=base.token, retry=once, timeout=10.0)
    with RetrieverClient(bad) as client, pytest.raises(Unavailable):
        client.retrieve("ledger")
    port = stack.retriever_addr.rsplit(":", 1)[1]
    good = TlsSettings(
        ca_file=tls.ca_file, cert_file=tls.cert_file, key_file=tls.key_file, server_name="localhost"
    )
    named = ClientSettings(f"127.0.0.1:{port}", tls=good, token=base.token, timeout=60.0)
    with RetrieverClient(named) as client:
        assert client.retrieve("ledger port", top_k=1).hits[0].doc_id == "ledger.md"


def test_plaintext_to_a_tls_port_is_unavailable(stack: BackgroundStack) -> None:
    plain = ClientSettings(
        stack.retriever_addr, token=TOKENS["reader"], retry=RetryPolicy(max_attempts=2)
    )
    with RetrieverClient(plain) as client, pytest.raises(Unavailable) as err:
        client.retrieve("ledger", deadline=10.0)
    assert err.value.attempts == 2


async def test_the_async_client_under_mutual_tls_with_a_token(
    stack: BackgroundStack, pki: Pki
) -> None:
    async with AsyncRetrieverClient(settings(stack.retriever_addr, pki)) as client:
        reply = await client.retrieve("which port does the ledger listen on", top_k=1)
    async with AsyncRetrieverClient(
        ClientSettings(stack.retriever_addr, tls=settings(stack.retriever_addr, pki).tls)
    ) as anonymous:
        with pytest.raises(Unauthenticated) as err:
            await anonymous.retrieve("ledger")
    assert reply.hits[0].doc_id == "ledger.md"
    assert "authorization: Bearer" in err.value.details
