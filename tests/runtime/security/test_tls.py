"""TLS and mutual TLS on the real stack: a TLS client works, a plaintext one
fails; under mutual TLS a client without a certificate is refused and a
client certificate can be the caller's identity. The container health check
and the command line use the same settings."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.embedding.embedder import Embedder
from services.runtime.healthcheck import is_serving, own_server_security
from services.runtime.security.client import ClientSecurity, TokenSource, sync_channel
from services.runtime.security.tls import ClientTls
from tests.support.certs import Pki
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

ADMIN_TOKEN = "tls-admin-token-0123456789abcdef"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


def callers() -> str:
    return json.dumps(
        [
            {
                "name": "ops",
                "roles": ["admin"],
                "scopes": ["*"],
                "cert_names": ["ops.rag.internal"],
            },
            {"name": "gw", "roles": ["reader"], "scopes": ["docs"], "cert_names": ["gateway.rag"]},
            {
                "name": "pipeline",
                "roles": ["admin"],
                "scopes": ["*"],
                "token_sha256": [hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()],
            },
        ]
    )


@pytest.fixture(scope="module")
def tls_stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, pki: Pki
) -> Iterator[BackgroundStack]:
    """Indexer under server-only TLS; Retriever under mutual TLS with callers."""
    indexer = pki.server_settings(require_client_cert=False)
    retriever = pki.server_settings(require_client_cert=True) | {"auth_callers": callers()}
    stack = BackgroundStack(
        tmp_path_factory.mktemp("tls"), embedder, indexer=indexer, retriever=retriever
    ).start()  # its own plaintext stubs stay unused: the ports speak TLS only
    yield stack
    stack.stop()


def stats(addr: str, security: ClientSecurity) -> ipb.StatsResponse:
    with sync_channel(addr, security) as channel:
        return indexer_pb2_grpc.IndexerStub(channel).Stats(ipb.StatsRequest(), timeout=10)


def test_a_tls_client_works_and_a_plaintext_client_fails(
    tls_stack: BackgroundStack, pki: Pki
) -> None:
    secure = ClientSecurity(ClientTls(ca_file=pki.ca_file))
    assert stats(tls_stack.indexer_addr, secure).embedding_dim == 384
    with pytest.raises(grpc.RpcError) as err:
        stats(tls_stack.indexer_addr, ClientSecurity())
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_client_that_does_not_trust_the_ca_is_refused(
    tls_stack: BackgroundStack, tmp_path: Path
) -> None:
    stranger = Pki.create(tmp_path)
    with pytest.raises(grpc.RpcError) as err:
        stats(tls_stack.indexer_addr, ClientSecurity(ClientTls(ca_file=stranger.ca_file)))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def retrieve_status(addr: str, security: ClientSecurity) -> grpc.StatusCode:
    from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
    from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc

    request = rpb.RetrieveRequest(query="ports", filter=rpb.ScopeFilter(scope_id="docs"))
    with sync_channel(addr, security) as channel:
        try:
            retriever_pb2_grpc.RetrieverStub(channel).Retrieve(request, timeout=30)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_mutual_tls_refuses_a_client_without_a_certificate_and_names_callers_by_certificate(
    tls_stack: BackgroundStack, pki: Pki
) -> None:
    addr = tls_stack.retriever_addr
    no_cert = ClientSecurity(ClientTls(ca_file=pki.ca_file))
    assert retrieve_status(addr, no_cert) == grpc.StatusCode.UNAVAILABLE
    gateway = pki.issue("gateway.rag")
    as_gateway = ClientSecurity(ClientTls(pki.ca_file, gateway.cert, gateway.key))
    assert retrieve_status(addr, as_gateway) == grpc.StatusCode.OK
    # A valid certificate that is not on the callers list: no identity.
    unknown = pki.issue("unknown.rag")
    as_unknown = ClientSecurity(ClientTls(pki.ca_file, unknown.cert, unknown.key))
    assert retrieve_status(addr, as_unknown) == grpc.StatusCode.UNAUTHENTICATED
    # A token over mutual TLS names the caller instead of the certificate.
    with_token = ClientSecurity(as_unknown.tls, TokenSource(ADMIN_TOKEN))
    assert retrieve_status(addr, with_token) == grpc.StatusCode.OK


def test_only_a_certificates_common_name_and_dns_names_name_a_caller(
    tls_stack: BackgroundStack, pki: Pki
) -> None:
    """gRPC lists every alternative name (URIs, e-mail addresses) with the DNS
    names; a certificate that carries a caller's name as one of those, which
    a CA may sign for whoever asks, is not that caller."""
    addr = tls_stack.retriever_addr
    named = {
        "as-uri": [x509.UniformResourceIdentifier("gateway.rag")],
        "as-email": [x509.RFC822Name("gateway.rag")],
    }
    for file_name, alternative in named.items():
        pair = pki.issue_named(file_name, "someone-else", alternative)
        security = ClientSecurity(ClientTls(pki.ca_file, pair.cert, pair.key))
        assert retrieve_status(addr, security) == grpc.StatusCode.UNAUTHENTICATED, file_name
    by_dns = pki.issue_named("as-dns", "someone-else", [x509.DNSName("gateway.rag")])
    security = ClientSecurity(ClientTls(pki.ca_file, by_dns.cert, by_dns.key))
    assert retrieve_status(addr, security) == grpc.StatusCode.OK


def test_the_health_check_uses_the_servers_own_tls_settings(
    tls_stack: BackgroundStack, pki: Pki
) -> None:
    settings = tls_stack.retriever_settings
    env = {
        "RAG_TLS_CERT_FILE": str(settings.tls_cert_file),
        "RAG_TLS_KEY_FILE": str(settings.tls_key_file),
        "RAG_TLS_CLIENT_CA_FILE": str(settings.tls_client_ca_file),
    }
    assert is_serving(tls_stack.retriever_addr, security=own_server_security(env))
    assert not is_serving(tls_stack.retriever_addr)  # plaintext


def test_the_command_line_reaches_a_tls_indexer(tls_stack: BackgroundStack, pki: Pki) -> None:
    env = {**os.environ, "RAG_INDEXER_TLS_CA_FILE": str(pki.ca_file)}
    cmd = [sys.executable, "-m", "services.operator.cli", "--addr", tls_stack.indexer_addr, "stats"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "embedding_dim" in result.stdout
    plain = {k: v for k, v in env.items() if k != "RAG_INDEXER_TLS_CA_FILE"}
    result = subprocess.run(cmd, env=plain, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "UNAVAILABLE" in result.stderr
