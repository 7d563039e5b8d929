"""A hostile caller's Indexer requests through the real servers: every field
is bounded and well typed, a bad document is REJECTED on its own (error_code
INVALID_ARGUMENT naming the field and the limit), a bad request as a whole is
INVALID_ARGUMENT, and nothing is ever INTERNAL or UNKNOWN."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

LIMITS = DocumentLimits()
BODY = "# Page\n\nA short body about canary rollouts."
REJECTED = ipb.DOCUMENT_STATE_REJECTED


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("input-limits"), embedder).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def channel(stack: BackgroundStack) -> Iterator[grpc.Channel]:
    """For requests sent as raw bytes (no serializer)."""
    with grpc.insecure_channel(stack.indexer_addr) as channel:
        yield channel


def doc(doc_id: str = "page.md", **fields: Any) -> ipb.Document:
    values: dict[str, Any] = {"locale": "en", "scope_id": "site", "text": BODY, **fields}
    return ipb.Document(doc_id=doc_id, **values)


def rpc_error(call: Any, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=60)
    return caught.value


def outcome_of(stack: BackgroundStack, document: ipb.Document) -> ipb.DocumentOutcome:
    reply = stack.upsert([document], dry_run=True)
    (outcome,) = reply.outcomes
    return outcome


def test_unknown_content_type_rejects_that_document_only(stack: BackgroundStack) -> None:
    good = doc("good.md")
    bad = doc("bad.md", content_type=99)
    reply = stack.upsert([bad, good], dry_run=True)
    assert [o.doc_id for o in reply.outcomes] == ["bad.md", "good.md"]
    rejected, added = reply.outcomes
    assert rejected.state == REJECTED and rejected.error_code == "INVALID_ARGUMENT"
    assert rejected.error == "content_type: unknown value 99 (known: 0, 1, 2, 3)"
    assert added.state == ipb.DOCUMENT_STATE_ADDED


@pytest.mark.parametrize(
    ("document", "error"),
    [
        (doc(title="t" * 1001), "title: 1001 characters, limit is 1000"),
        (doc(url="https://x.test/" + "u" * 2040), "url: 2055 characters, limit is 2048"),
        (doc(url="https://x.test/\n"), "url: must not contain control characters"),
        (doc(metadata={"k" * 129: "v"}), "has 129 characters, limit is 128"),
        (doc(metadata={"a\nb": "v"}), "no control characters"),
        (doc(metadata={"a=b": "v"}), "contain no '='"),
        (doc("a\x00b"), "doc_id: contains the control character U+0000"),
        (doc("line\nbreak"), "doc_id: contains the control character U+000A"),
        (doc("c1\x85"), "doc_id: contains the control character U+0085"),
        (doc("abc\u202etxt.md"), "doc_id: contains the format character U+202E"),
        (doc("guide\u200b.md"), "doc_id: contains the format character U+200B"),
        (doc(" guide.md"), "doc_id: ' guide.md' begins or ends with white space"),
        (doc("guide.md\u3000"), "begins or ends with white space"),
        (doc("x" * 513), "doc_id: 513 characters, limit is 512"),
        (doc(scope_id=""), "scope_id: must not be empty"),
        (doc(scope_id="s" * 129), "scope_id: 129 characters, limit is 128"),
        (doc(scope_id="my site"), "scope_id: 'my site' may hold only letters, digits"),
        (doc(locale="en\n"), "locale: 'en\\n' is not a BCP 47 language tag"),
        (doc(locale="<script>"), "locale: '<script>' is not a BCP 47 language tag"),
        (doc(locale="EN"), "locale: 'EN' is not a BCP 47 language tag"),
    ],
)
def test_bad_fields_reject_the_document_naming_field_and_limit(
    stack: BackgroundStack, document: ipb.Document, error: str
) -> None:
    outcome = outcome_of(stack, document)
    assert outcome.state == REJECTED
    assert outcome.error_code == "INVALID_ARGUMENT"
    assert error in outcome.error


@pytest.mark.parametrize(
    ("document", "error"),
    [
        (doc(text=" \n\t "), "text: document 'page.md' has an empty body"),
        (doc(text="\u200b\u2060\ufeff \n"), "text: document 'page.md' has an empty body"),
        # Bodies that clean down to nothing: once ADDED with no chunk, found by
        # nothing, and their page read "not indexed" (probe 3).
        (
            doc(text="<!-- draft -->\n\n[ref]: https://x.test/"),
            "text: document 'page.md' has nothing to index once read as markdown",
        ),
        (doc(text="---\ntitle: Only front matter\n---\n"), "has nothing to index"),
        (
            doc(
                text="<div id=root></div><script src=app.js></script>",
                content_type=ipb.CONTENT_TYPE_HTML,
            ),
            "text: document 'page.md' has nothing to index once read as html (markup, "
            "comments, front matter, scripts, styles or punctuation only)",
        ),
    ],
)
def test_bodies_with_nothing_to_index_are_rejected_as_empty_documents(
    stack: BackgroundStack, document: ipb.Document, error: str
) -> None:
    outcome = outcome_of(stack, document)
    assert outcome.state == REJECTED and outcome.error_code == "EMPTY_DOCUMENT"
    assert error in outcome.error


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"url": "javascript:alert(3)"},
            "url: scheme 'javascript' is not allowed; "
            "url must be an absolute http(s) URL or a relative path",
        ),
        ({"url": "data:text/html,<script>alert(1)</script>"}, "url: scheme 'data' is not allowed"),
        ({"url": "file:///etc/passwd"}, "url: scheme 'file' is not allowed"),
        ({"url": "VBScript:msgbox"}, "url: scheme 'vbscript' is not allowed"),
        ({"url": " javascript:alert(1)"}, "url: starts or ends with whitespace"),
        ({"url": "//evil.example/x"}, "url: a scheme-relative URL (//host) is not allowed"),
        ({"url": "https:/no-host"}, "url: an absolute https URL needs a host"),
        ({"title": "Two\nlines"}, "title: contains the control character U+000A"),
        (
            {"title": "abc\u202etxt.exe"},
            "title: contains the format character U+202E (RIGHT-TO-LEFT OVERRIDE)",
        ),
        ({"title": "\u200b"}, "title: contains the format character U+200B (ZERO WIDTH SPACE)"),
        ({"metadata": {"k": "v\x1bv"}}, "metadata['k']: contains the control character U+001B"),
        ({"metadata": {"k\x00": "v"}}, "metadata: key 'k\\x00' must be non-empty"),
        ({"metadata": {"k\u2066": "v"}}, "metadata: key 'k\\u2066': contains the format character"),
        (
            {"url": "https://user:pass@evil.example@good.example/"},
            "url: contains credentials (user:password@ before the host)",
        ),
        (
            {"url": "https://p\u0430ypal.example/"},
            "url: host label 'p\u0430ypal' mixes Cyrillic and Latin letters",
        ),
        (
            {"updated_at": "not-a-date"},
            "updated_at: 'not-a-date' is not an RFC 3339 date-time such as "
            "2024-05-01T12:00:00Z (or a full-date such as 2024-05-01)",
        ),
        ({"updated_at": "2024-02-30T10:00:00Z"}, "updated_at: '2024-02-30T10:00:00Z' is not"),
        ({"updated_at": "2024-05-01T10:00:00"}, "is not an RFC 3339 date-time"),  # no offset
    ],
)
def test_unsafe_urls_titles_and_dates_reject_that_document_only(
    stack: BackgroundStack, fields: dict[str, Any], error: str
) -> None:
    reply = stack.upsert([doc("bad.md", **fields), doc("good.md")], dry_run=True)
    rejected, added = reply.outcomes
    assert (rejected.doc_id, rejected.state, rejected.error_code) == (
        "bad.md",
        REJECTED,
        "INVALID_ARGUMENT",
    )
    assert error in rejected.error
    assert added.state == ipb.DOCUMENT_STATE_ADDED  # the rest of the batch goes on


def test_web_urls_dates_and_markup_in_titles_are_accepted_as_written(
    stack: BackgroundStack,
) -> None:
    """A title is plain text: `<script>` is stored and returned as the seven
    characters it is, for the reader to show as text (never as HTML)."""
    title = "<script>alert(1)</script> & Vec<T>"
    accepted = [
        doc("abs.md", url="https://docs.example/a?b=1#c", updated_at="2024-05-01T12:00:00Z"),
        doc("rel.md", url="guides/setup.md", updated_at="2024-05-01T14:00:00.5+02:00"),
        doc("root.md", url="/docs/rel", updated_at="2024-05-01"),
        doc("markup.md", url="", title=title, text="# Markup\n\nA page about the canary ledger."),
    ]
    reply = stack.upsert(accepted)
    assert [o.state for o in reply.outcomes] == [ipb.DOCUMENT_STATE_ADDED] * 4
    hits = stack.retrieve("canary ledger").hits
    assert title in {h.title for h in hits}


def test_joiners_line_broken_values_and_one_script_hosts_are_accepted(
    stack: BackgroundStack,
) -> None:
    """What the one-line rule keeps: the joiners words and emoji need, line
    breaks in a metadata value (front matter spans lines), format characters
    in a body, and hosts wholly in one script."""
    accepted = [
        doc("fa.md", title="\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", locale="fa"),
        doc("emoji.md", title="\U0001f468\u200d\U0001f469\u200d\U0001f467 plans"),
        doc("meta.md", metadata={"description": "line one\nline two\ttabbed"}),
        doc("body.md", text="# Body\n\nzero\u200bwidth and \u202eoverride stay in a body.\n"),
        doc("zh.md", url="https://\u4f8b\u5b50.\u6d4b\u8bd5/docs", locale="zh-Hant-TW"),
    ]
    reply = stack.upsert(accepted, dry_run=True)
    assert [(o.doc_id, o.error) for o in reply.outcomes if o.state == REJECTED] == []


def test_a_huge_field_is_not_echoed_back(stack: BackgroundStack) -> None:
    megabyte = "k" * 1_000_000
    for document in (doc(metadata={megabyte: "v"}), doc(scope_id=megabyte), doc(locale=megabyte)):
        outcome = outcome_of(stack, document)
        assert outcome.state == REJECTED and len(outcome.error) < 200


def test_identifier_characters_that_are_allowed(stack: BackgroundStack) -> None:
    document = doc("docs/Ünïcode page (1).md", scope_id="tenant-1:site_a/v2.0", title="T" * 1000)
    assert outcome_of(stack, document).state == ipb.DOCUMENT_STATE_ADDED


def test_a_one_character_body_and_a_body_with_invisible_characters_are_indexed(
    stack: BackgroundStack,
) -> None:
    for text in ("x", "\u200bword\u200b", "\u4e2d"):
        assert outcome_of(stack, doc(text=text)).state == ipb.DOCUMENT_STATE_ADDED


def test_a_leading_byte_order_mark_hides_neither_front_matter_nor_headings(
    stack: BackgroundStack,
) -> None:
    # Probe 1: "\ufeff---" was no fence, so the front matter's owner address
    # was indexed and shown, and the page had no heading path.
    body = "\ufeff---\ntitle: Internal\nowner: alice@example.com\n---\n\n# Setup\n\nport settings"
    reply = stack.upsert([doc("bom.md", scope_id="bom", text=body)])
    assert reply.outcomes[0].state == ipb.DOCUMENT_STATE_ADDED
    found = stack.retrieve("port settings", top_k=1, filter=rpb.ScopeFilter(scope_id="bom"))
    (hit,) = found.hits
    assert hit.heading_path == "Setup" and hit.text == "# Setup\n\nport settings"
    hidden = stack.retrieve("alice@example.com", top_k=5, filter=rpb.ScopeFilter(scope_id="bom"))
    assert all("alice" not in h.text for h in hidden.hits)


def test_an_unspecified_content_type_reads_a_web_page_as_html(stack: BackgroundStack) -> None:
    # Probe 2: read as Markdown, the doctype was indexed and the headings lost.
    page = "<!DOCTYPE html><html><body><h1>Top</h1><p>intro</p><h2>Sub</h2><p>guessword</p>"
    markdown = "<b>Bold</b> text that merely holds a tag, and a guessword"
    stack.upsert(
        [
            doc("page.html", scope_id="guess", text=page),
            doc("note.md", scope_id="guess", text=markdown),
        ]
    )
    found = stack.retrieve("guessword", top_k=5, filter=rpb.ScopeFilter(scope_id="guess"))
    by_doc = {h.doc_id: h for h in found.hits}
    page_hit = by_doc["page.html"]
    assert page_hit.heading_path == "Top" and page_hit.text.startswith("# Top\n")
    assert "## Sub" in page_hit.text and "doctype" not in page_hit.text.lower()
    assert by_doc["note.md"].text == "Bold text that merely holds a tag, and a guessword"


def test_an_id_refused_for_new_documents_can_still_be_deleted(stack: BackgroundStack) -> None:
    """Ids that predate the id rule (leading space, bidi control) stay deletable:
    Delete checks only their length, and answers for each as usual."""
    reply = stack.indexer.Delete(
        ipb.DeleteRequest(doc_ids=[" old.md", "a\u202eb.md"], dry_run=True), timeout=60
    )
    assert [(o.doc_id, o.state) for o in reply.outcomes] == [
        (" old.md", REJECTED),
        ("a\u202eb.md", REJECTED),
    ]
    assert all(o.error_code == "NOT_FOUND" for o in reply.outcomes)


def test_too_many_documents_in_one_request(stack: BackgroundStack) -> None:
    count = LIMITS.max_batch_documents + 1
    request = ipb.UpsertRequest(documents=[doc(f"d{i}") for i in range(count)], dry_run=True)
    expected = f"documents: {count} documents in one request, limit is {count - 1}"
    for call in (
        stack.indexer.Upsert,
        lambda r, timeout: list(stack.indexer.UpsertStream(r, timeout=timeout)),
    ):
        error = rpc_error(call, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.details() == expected


def test_delete_counts_each_id_once_in_first_occurrence_order(stack: BackgroundStack) -> None:
    added = stack.upsert([doc("one.md"), doc("two.md")])
    assert added.counts.added == 2
    chunks = {o.doc_id: o.chunks for o in added.outcomes}
    reply = stack.indexer.Delete(
        ipb.DeleteRequest(doc_ids=["two.md", "one.md", "two.md", "gone.md", "one.md"]), timeout=60
    )
    assert [(o.doc_id, o.state) for o in reply.outcomes] == [
        ("two.md", ipb.DOCUMENT_STATE_REMOVED),
        ("one.md", ipb.DOCUMENT_STATE_REMOVED),
        ("gone.md", REJECTED),
    ]
    assert reply.counts.removed == 2
    assert reply.counts.vectors_to_delete == chunks["one.md"] + chunks["two.md"]


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (ipb.DeleteRequest(), "doc_ids: at least one document id is required"),
        (
            ipb.DeleteRequest(doc_ids=["x"] * 10_001),
            "doc_ids: 10001 ids in one request, limit is 10000",
        ),
        (ipb.DeleteRequest(doc_ids=["ok", "y" * 513]), "doc_ids[1]: 513 characters, limit is 512"),
        (ipb.DeleteRequest(doc_ids=["ok", " "]), "doc_ids[1]: must not be empty"),
        (
            ipb.DeleteRequest(doc_ids=["ok"], locale="l" * 100_000),
            "locale: 100000 characters, limit is 35",
        ),
    ],
)
def test_bad_delete_requests(
    stack: BackgroundStack, request_: ipb.DeleteRequest, error: str
) -> None:
    request_.dry_run = True
    failure = rpc_error(stack.indexer.Delete, request_)
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (failure.details() or "").startswith(error)
    assert len(failure.details() or "") < 200


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (ipb.SyncRequest(), "scope_id: must not be empty"),
        (ipb.SyncRequest(scope_id="a b"), "scope_id: 'a b' may hold only letters"),
        (ipb.SyncRequest(scope_id="s" * 129), "scope_id: 129 characters, limit is 128"),
        (
            ipb.SyncRequest(scope_id="site", keep=[ipb.DocumentKey(doc_id="k" * 513)]),
            "keep[0].doc_id: 513 characters, limit is 512",
        ),
        (
            ipb.SyncRequest(scope_id="site", keep=[ipb.DocumentKey(doc_id="k", locale="x\n")]),
            "keep[0].locale: 'x\\n' is not a BCP 47 language tag",
        ),
        (
            ipb.SyncRequest(scope_id="site", documents=[doc("other", scope_id="other")]),
            "documents: 1 are not in scope 'site'",
        ),
    ],
)
def test_bad_sync_requests(stack: BackgroundStack, request_: ipb.SyncRequest, error: str) -> None:
    request_.dry_run = True
    failure = rpc_error(stack.indexer.Sync, request_)
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (failure.details() or "").startswith(error)


def test_sync_keep_list_is_bounded(channel: grpc.Channel) -> None:
    count = LIMITS.max_sync_keep + 1
    keep = ipb.SyncRequest(scope_id="site", dry_run=True).SerializeToString()
    key = ipb.SyncRequest(keep=[ipb.DocumentKey(doc_id="k")]).SerializeToString()
    call = channel.unary_unary("/rag.indexer.v1.Indexer/Sync")
    failure = rpc_error(call, keep + key * count)  # repeated fields concatenate
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert failure.details() == (
        f"keep: {count} document keys in one request, limit is {count - 1}"
    )


def test_undecodable_upsert_is_invalid_argument(channel: grpc.Channel) -> None:
    call = channel.unary_unary("/rag.indexer.v1.Indexer/Upsert")
    failure = rpc_error(call, b"\x0a\x04\x0a\x02\xc3\x28")  # documents[0].doc_id: bad UTF-8
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert failure.details() == (
        "request could not be decoded as rag.indexer.v1.UpsertRequest: string field had bad UTF-8"
    )


def test_limits_come_from_settings_of_the_same_names() -> None:
    settings = IndexerSettings(max_title_chars=50, max_delete_ids=7, allowed_locales="en, de")
    limits = DocumentLimits.from_settings(settings)
    assert limits.max_title_chars == 50 and limits.max_delete_ids == 7
    assert limits.allowed_locales == frozenset({"en", "de"})
    defaults = DocumentLimits.from_settings(IndexerSettings())
    assert defaults == DocumentLimits()


def _committed(stack: BackgroundStack, scope_id: str) -> set[tuple[str, str]]:
    """The (doc_id, locale) pairs a Retrieve over `scope_id` serves."""
    reply = stack.retrieve(
        "walrus tusks",
        top_k=50,
        disable_rerank=True,
        filter=rpb.ScopeFilter(scope_id=scope_id),
    )
    return {(hit.doc_id, hit.locale) for hit in reply.hits}


WALRUS = "# Walrus\n\nThe walrus uses its tusks to haul itself onto the ice."


@pytest.mark.parametrize("bad_locale", ["EN", "BAD LOCALE", "en\n"])
def test_a_sync_never_removes_a_page_whose_new_version_it_rejected_for_its_locale(
    stack: BackgroundStack, bad_locale: str
) -> None:
    """Found by a probe: a page sent with a locale that is no tag was REJECTED
    and REMOVED in the same Sync, its committed version gone."""
    scope = f"sync-locale-{len(bad_locale)}"
    page_id = f"walrus-{scope}.md"  # an id belongs to one scope
    page = doc(page_id, scope_id=scope, text=WALRUS)
    assert stack.upsert([page]).counts.added == 1
    bad = doc(page_id, scope_id=scope, text=WALRUS + " Updated.", locale=bad_locale)
    reply = stack.indexer.Sync(ipb.SyncRequest(scope_id=scope, documents=[bad]), timeout=120)
    assert [(o.doc_id, o.state) for o in reply.outcomes] == [(page_id, REJECTED)]
    assert "locale" in reply.outcomes[0].error
    assert reply.counts.removed == 0
    assert _committed(stack, scope) == {(page_id, "en")}


def test_a_locale_in_another_case_is_the_same_locale(stack: BackgroundStack) -> None:
    """`zh-cn` is `zh-CN` (BCP 47 tags are case-insensitive): stored, kept,
    filtered and deleted as the canonical tag. Before, a Sync sending `zh-cn`
    added a second document and removed the committed `zh-CN` one."""
    scope = "sync-case"
    assert stack.upsert([doc("walrus.md", scope_id=scope, text=WALRUS, locale="zh-CN")])
    resent = doc("walrus.md", scope_id=scope, text=WALRUS, locale="zh-cn")
    reply = stack.indexer.Sync(ipb.SyncRequest(scope_id=scope, documents=[resent]), timeout=120)
    assert [(o.doc_id, o.state) for o in reply.outcomes] == [
        ("walrus.md", ipb.DOCUMENT_STATE_UNCHANGED)
    ]
    assert reply.counts.removed == 0
    kept = ipb.SyncRequest(
        scope_id=scope, keep=[ipb.DocumentKey(doc_id="walrus.md", locale="zh-cn")]
    )
    assert stack.indexer.Sync(kept, timeout=120).counts.removed == 0
    assert _committed(stack, scope) == {("walrus.md", "zh-CN")}
    filtered = stack.retrieve(
        "walrus tusks", disable_rerank=True, filter=rpb.ScopeFilter(scope_id=scope, locale="zh-cn")
    )
    assert [hit.locale for hit in filtered.hits] == ["zh-CN"]
    gone = stack.indexer.Delete(
        ipb.DeleteRequest(doc_ids=["walrus.md"], locale="zh-cn"), timeout=120
    )
    assert gone.counts.removed == 1
    assert _committed(stack, scope) == set()
