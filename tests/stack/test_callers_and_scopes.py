"""Caller identity on the real stack: bearer tokens mapped to roles and
scopes by the server, enforced on every RPC (Indexer and Retriever), and a
document's identity protected across scopes."""

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
from grpc_health.v1 import health_pb2, health_pb2_grpc
from structlog.testing import capture_logs

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

TOKENS = {
    "reader-a": "tok-reader-a-0123456789abcdef",
    "reader-ab": "tok-reader-ab-0123456789abcdef",
    "writer-a": "tok-writer-a-0123456789abcdef",
    "writer-b": "tok-writer-b-0123456789abcdef",
    "admin": "tok-admin-0123456789abcdef01",
}
CALLERS = [
    {"name": "reader-a", "roles": ["reader"], "scopes": ["alpha"]},
    {"name": "reader-ab", "roles": ["reader"], "scopes": ["alpha", "beta"]},
    {"name": "writer-a", "roles": ["writer"], "scopes": ["alpha"]},
    {"name": "writer-b", "roles": ["writer"], "scopes": ["beta"]},
    {"name": "admin", "roles": ["admin"], "scopes": ["*"]},
]
GRPCURL = str(Path(sys.executable).parent / "grpcurl")


def callers_json() -> str:
    entries = [
        {**c, "token_sha256": [hashlib.sha256(TOKENS[c["name"]].encode()).hexdigest()]}
        for c in CALLERS
    ]
    return json.dumps(entries)


def doc(doc_id: str, scope: str, text: str) -> ipb.Document:
    return ipb.Document(doc_id=doc_id, scope_id=scope, locale="en", title=doc_id, text=text)


BETA_PAGE = doc(
    "architecture.md",
    "beta",
    "# Architecture\n\nThe beta team's gateway forwards requests to port 7311 of the ledger.",
)
ALPHA_PAGE = doc(
    "alpha-guide.md",
    "alpha",
    "# Alpha guide\n\nAlpha services restart nightly; the ledger lives on port 7311 too.",
)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    auth = {"auth_callers": callers_json()}
    stack = BackgroundStack(
        tmp_path_factory.mktemp("auth"), embedder, indexer=auth, retriever=auth
    ).start()
    yield stack
    stack.stop()


def as_caller(name: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {TOKENS[name]}")]


def indexer(stack: BackgroundStack) -> indexer_pb2_grpc.IndexerStub:
    return stack.indexer


def upsert(stack: BackgroundStack, who: str, *docs: ipb.Document) -> ipb.UpsertResponse:
    request = ipb.UpsertRequest(documents=list(docs))
    return stack.indexer.Upsert(request, metadata=as_caller(who), timeout=120)


def retrieve(stack: BackgroundStack, who: str, scope: str = "") -> rpb.RetrieveResponse:
    request = rpb.RetrieveRequest(query="ledger port 7311", filter=rpb.ScopeFilter(scope_id=scope))
    return stack.retriever.Retrieve(request, metadata=as_caller(who), timeout=30)


def code_of(call) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


@pytest.fixture(scope="module", autouse=True)
def seeded(stack: BackgroundStack) -> None:
    assert upsert(stack, "writer-b", BETA_PAGE).counts.added == 1
    assert upsert(stack, "writer-a", ALPHA_PAGE).counts.added == 1


def test_calls_without_or_with_a_wrong_token_are_unauthenticated(stack: BackgroundStack) -> None:
    request = rpb.RetrieveRequest(query="ledger")
    code, message = code_of(lambda: stack.retriever.Retrieve(request, timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and "authorization: Bearer" in message
    bad = [("authorization", "Bearer not-a-token-at-all-xxxxxxxx")]
    code, message = code_of(lambda: stack.retriever.Retrieve(request, metadata=bad, timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and "unknown or revoked" in message
    basic = [("authorization", "Basic dXNlcjpwYXNz")]
    code, _ = code_of(lambda: stack.indexer.Stats(ipb.StatsRequest(), metadata=basic, timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED


def test_two_authorization_headers_are_refused_whatever_their_order(
    stack: BackgroundStack,
) -> None:
    # Probe: the last header won, so a proxy reading the first saw another caller.
    request = ipb.StatsRequest()
    for first, second in (("writer-a", "admin"), ("admin", "writer-a")):
        twice = [*as_caller(first), *as_caller(second)]
        code, message = code_of(
            lambda twice=twice: stack.indexer.Stats(request, metadata=twice, timeout=10)
        )
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert message == "authorization: sent more than once; send one credential"


def test_a_scope_refusal_is_logged_as_every_refusal_is(stack: BackgroundStack) -> None:
    foreign = doc("logged.md", "beta", "# Logged\n\nA page written into someone else's scope.")
    with capture_logs() as logs:
        code, message = code_of(lambda: upsert(stack, "writer-a", foreign))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    refused = [e for e in logs if e["event"] == "call_refused"]
    assert [(e["code"], e["reason"]) for e in refused] == [("PERMISSION_DENIED", message)]


def test_health_stays_open_without_a_token(stack: BackgroundStack) -> None:
    with grpc.insecure_channel(stack.retriever_addr) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_each_role_reaches_only_its_methods(stack: BackgroundStack) -> None:
    code, message = code_of(lambda: upsert(stack, "reader-a", ALPHA_PAGE))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "'reader-a'" in message and "Indexer/Upsert" in message and "writer role" in message
    code, message = code_of(
        lambda: stack.indexer.Stats(ipb.StatsRequest(), metadata=as_caller("writer-a"), timeout=10)
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED and "admin role" in message
    stats = stack.indexer.Stats(ipb.StatsRequest(), metadata=as_caller("admin"), timeout=30)
    assert stats.documents == 2
    code, _ = code_of(lambda: retrieve(stack, "writer-a", "alpha"))
    assert code == grpc.StatusCode.PERMISSION_DENIED  # writing is not reading
    verify = ipb.VerifyRequest(repair=True)
    code, _ = code_of(
        lambda: list(stack.indexer.Verify(verify, metadata=as_caller("writer-a"), timeout=30))
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_a_reader_sees_only_its_scope_whatever_the_request_says(stack: BackgroundStack) -> None:
    # No scope in the request: the server applies the reader's one scope.
    hits = retrieve(stack, "reader-a").hits
    assert hits and {h.scope_id for h in hits} == {"alpha"}
    code, message = code_of(lambda: retrieve(stack, "reader-a", "beta"))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "may not read scope 'beta'" in message
    # A reader of two scopes names the one it asks about.
    code, message = code_of(lambda: retrieve(stack, "reader-ab"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "filter.scope_id" in message
    assert {h.scope_id for h in retrieve(stack, "reader-ab", "beta").hits} == {"beta"}
    # Current-page lookups stay inside the scope too.
    page = rpb.RetrieveRequest(query="what is this page about", page_url="architecture.md")
    reply = stack.retriever.Retrieve(page, metadata=as_caller("reader-a"), timeout=30)
    assert all(h.scope_id == "alpha" for h in reply.hits)


def test_a_reader_of_several_scopes_searches_them_at_once(stack: BackgroundStack) -> None:
    def several(who: str, *scopes: str, **extra: str) -> rpb.RetrieveResponse:
        scope = rpb.ScopeFilter(scope_ids=list(scopes), **extra)
        request = rpb.RetrieveRequest(query="ledger port 7311", filter=scope)
        return stack.retriever.Retrieve(request, metadata=as_caller(who), timeout=30)

    both = several("reader-ab", "alpha", "beta").hits
    assert {h.scope_id for h in both} == {"alpha", "beta"}
    # The same two pages as searching each scope apart, in one fused order.
    apart = (
        retrieve(stack, "reader-ab", "alpha").hits[:1]
        + retrieve(stack, "reader-ab", "beta").hits[:1]
    )
    assert {h.chunk_id for h in both[:2]} == {h.chunk_id for h in apart}
    assert {h.scope_id for h in several("reader-ab", "beta", "beta").hits} == {"beta"}
    code, message = code_of(lambda: several("reader-a", "alpha", "beta"))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "filter.scope_ids" in message and "'beta'" in message
    code, message = code_of(lambda: several("reader-ab", "alpha", "beta", scope_id="alpha"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not both" in message
    code, message = code_of(lambda: several("admin", *[f"s{i}" for i in range(65)]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "limit is 64" in message


def test_a_writer_cannot_write_into_another_scope(stack: BackgroundStack) -> None:
    foreign = doc("new-page.md", "beta", "# New\n\nA page written into someone else's scope.")
    code, message = code_of(lambda: upsert(stack, "writer-a", foreign))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "documents[0].scope_id" in message and "'beta'" in message
    sync = ipb.SyncRequest(scope_id="beta", documents=[])
    code, _ = code_of(lambda: stack.indexer.Sync(sync, metadata=as_caller("writer-a"), timeout=30))
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_a_writer_cannot_take_over_a_doc_id_owned_by_another_scope(stack: BackgroundStack) -> None:
    # Same body (was METADATA_ONLY: a move) and a new body (was CHANGED: an overwrite).
    same = doc(BETA_PAGE.doc_id, "alpha", BETA_PAGE.text)
    changed = doc(BETA_PAGE.doc_id, "alpha", "# Architecture\n\nReplaced by the alpha writer.")
    for attempt in (same, changed):
        outcome = upsert(stack, "writer-a", attempt).outcomes[0]
        assert outcome.state == ipb.DOCUMENT_STATE_REJECTED
        assert outcome.error_code == "ALREADY_EXISTS" and "another scope" in outcome.error
        assert "beta" not in outcome.error  # nothing learnt about other scopes
    hits = retrieve(stack, "reader-ab", "beta").hits
    assert hits[0].doc_id == "architecture.md" and "port 7311 of the ledger" in hits[0].text


def test_a_writer_cannot_delete_another_scopes_document(stack: BackgroundStack) -> None:
    request = ipb.DeleteRequest(doc_ids=[BETA_PAGE.doc_id])
    reply = stack.indexer.Delete(request, metadata=as_caller("writer-a"), timeout=30)
    assert reply.outcomes[0].state == ipb.DOCUMENT_STATE_REJECTED
    assert reply.outcomes[0].error_code == "NOT_FOUND"  # as if it did not exist
    assert reply.counts.removed == 0
    assert retrieve(stack, "reader-ab", "beta").hits[0].doc_id == BETA_PAGE.doc_id


def test_a_sync_of_ones_own_scope_leaves_other_scopes_alone(stack: BackgroundStack) -> None:
    sync = ipb.SyncRequest(scope_id="alpha", documents=[ALPHA_PAGE], dry_run=True)
    reply = stack.indexer.Sync(sync, metadata=as_caller("writer-a"), timeout=60)
    assert reply.counts.removed == 0 and reply.counts.unchanged == 1


def test_grpcurl_with_a_token_as_in_the_readme(stack: BackgroundStack) -> None:
    result = subprocess.run(
        [
            GRPCURL,
            "-plaintext",
            "-H",
            f"authorization: Bearer {TOKENS['reader-a']}",
            "-d",
            '{"query": "ledger port 7311"}',
            stack.retriever_addr,
            "rag.retriever.v1.Retriever/Retrieve",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    hit = json.loads(result.stdout)["hits"][0]
    assert hit.get("scopeId", hit.get("scope_id")) == "alpha"


def test_an_unknown_caller_learns_nothing_about_its_request(stack: BackgroundStack) -> None:
    """Callers are identified first: malformed bytes from an unknown caller are
    UNAUTHENTICATED, not INVALID_ARGUMENT; from a known one, INVALID_ARGUMENT."""
    with grpc.insecure_channel(stack.indexer_addr) as channel:
        raw = channel.unary_unary("/rag.indexer.v1.Indexer/Upsert")
        code, _ = code_of(lambda: raw(b"\xff\xff\xff\xff", timeout=10))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code, message = code_of(lambda: raw(b"\xff\xff\xff\xff", metadata=as_caller("writer-a")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "could not be decoded" in message


def delete(
    stack: BackgroundStack, who: str, doc_id: str, locale: str = "", dry_run: bool = False
) -> ipb.DeleteResponse:
    request = ipb.DeleteRequest(doc_ids=[doc_id], locale=locale, dry_run=dry_run)
    return stack.indexer.Delete(request, metadata=as_caller(who), timeout=60)


def anonymised(reply: ipb.DeleteResponse, doc_id: str) -> bytes:
    """The reply's bytes with the one doc_id asked about written as "<id>"."""
    copy = ipb.DeleteResponse()
    copy.CopyFrom(reply)
    for outcome in copy.outcomes:
        assert outcome.doc_id == doc_id
        outcome.doc_id = "<id>"
        outcome.error = outcome.error.replace(repr(doc_id), "'<id>'")
    return copy.SerializeToString(deterministic=True)


def test_delete_answers_a_missing_and_a_foreign_document_alike(stack: BackgroundStack) -> None:
    """Byte for byte, whatever the locale asked and whatever locales the other
    scope holds: once "(locale 'de')" and one outcome per foreign locale told
    the other scope's documents apart from missing ones."""
    body = "# Page\n\nA page about the ledger."
    beta = [
        ipb.Document(doc_id="two-locales.md", scope_id="beta", locale=loc, text=body)
        for loc in ("en", "de")
    ] + [ipb.Document(doc_id="shared.md", scope_id="beta", locale="de", text=body)]
    alpha = [
        ipb.Document(doc_id=d, scope_id="alpha", locale="en", text=body)
        for d in ("shared.md", "alpha-only.md")
    ]
    assert upsert(stack, "writer-b", *beta).counts.added == 3
    assert upsert(stack, "writer-a", *alpha).counts.added == 2
    try:
        for locale in ("", "en", "de"):
            for dry_run in (True, False):
                foreign = delete(stack, "writer-a", "two-locales.md", locale, dry_run)
                missing = delete(stack, "writer-a", "no-such-page.md", locale, dry_run)
                assert foreign.outcomes[0].error_code == "NOT_FOUND"
                assert anonymised(foreign, "two-locales.md") == anonymised(
                    missing, "no-such-page.md"
                ), (locale, dry_run)
        # Held in alpha (en) and in beta (de): the answer is alpha's alone.
        shared = delete(stack, "writer-a", "shared.md", dry_run=True)
        own = delete(stack, "writer-a", "alpha-only.md", dry_run=True)
        assert [o.state for o in shared.outcomes] == [ipb.DOCUMENT_STATE_REMOVED]
        assert anonymised(shared, "shared.md") == anonymised(own, "alpha-only.md")
    finally:
        for d in beta:
            delete(stack, "writer-b", d.doc_id, d.locale)
        for d in alpha:
            delete(stack, "writer-a", d.doc_id, d.locale)
