"""Golden-query files: every malformed line is refused naming its line and
field; answers are judged by rank, evidence text and page expectations."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.operator import golden as golden_module
from services.operator.golden import (
    GoldenFileError,
    GoldenQuery,
    judge,
    load_golden,
    retrieve_request,
    score,
)

pytestmark = pytest.mark.unit

GOOD = {"query": "what does status 429 mean", "expected_doc_ids": ["rate-limits.md"]}


def write_lines(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "golden.jsonl"
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ("{not json", "line", "not valid JSON"),
        ("[1, 2]", "line", "JSON object"),
        ({"expected_doc_ids": ["a.md"]}, "query", "is required"),
        ({"query": "  ", "expected_doc_ids": ["a.md"]}, "query", "must not be empty"),
        ({"query": 7, "expected_doc_ids": ["a.md"]}, "query", "must be a string"),
        ({"query": "q"}, "expected_doc_ids", "is required unless"),
        ({"query": "q", "expected_doc_ids": "a.md"}, "expected_doc_ids", "list"),
        ({"query": "q", "expected_doc_ids": []}, "expected_doc_ids", "at least one"),
        ({"query": "q", "expected_doc_id": ["a.md"]}, "expected_doc_id", "unknown field"),
        ({**GOOD, "top_k": 0}, "top_k", "from 1 to 100"),
        ({**GOOD, "top_k": "5"}, "top_k", "integer"),
        ({**GOOD, "top_k": True}, "top_k", "integer"),
        ({**GOOD, "must_contain": ""}, "must_contain", "must not be empty"),
        ({**GOOD, "expected_intent": "current_page"}, "expected_intent", "needs page_url"),
        (
            {"query": "q", "page_url": "https://x", "expected_intent": "page"},
            "expected_intent",
            "not one of",
        ),
        (
            {"query": "q", "page_url": "https://x", "expected_page_status": "missing"},
            "expected_page_status",
            "not one of",
        ),
        ("[" * 100_000 + "]" * 100_000, "line", "nested too deeply"),
        ('{"query": "a", "query": "b", "expected_doc_ids": ["a"]}', "line", "appears twice"),
        ('{"query": "q\\ud800", "expected_doc_ids": ["a"]}', "query", "lone surrogate"),
        ('{"query": "q", "expected_doc_ids": ["\\udfff"]}', "expected_doc_ids", "surrogate"),
        ({**GOOD, "locale": "english please"}, "locale", "not a language tag"),
        ({**GOOD, "scope_id": "hand book"}, "scope_id", "only letters, digits"),
    ],
)
def test_malformed_line_names_its_line_and_field(
    tmp_path: Path, bad: object, field: str, words: str
) -> None:
    path = write_lines(tmp_path, GOOD, "", bad)
    with pytest.raises(GoldenFileError) as caught:
        load_golden(path)
    assert caught.value.line == 3  # blank lines count, so the number matches an editor's
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}:3: {field}: ")
    assert words in str(caught.value)


def test_empty_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(GoldenFileError, match="holds no golden queries"):
        load_golden(write_lines(tmp_path, "", "   "))
    with pytest.raises(GoldenFileError, match="cannot be read"):
        load_golden(tmp_path / "missing.jsonl")
    raw = tmp_path / "latin1.jsonl"
    raw.write_bytes(b'{"query": "caf\xe9", "expected_doc_ids": ["a"]}\n')
    with pytest.raises(GoldenFileError, match="not UTF-8"):
        load_golden(raw)


def test_a_fifo_an_oversized_file_a_bom_and_odd_line_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "golden.fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    with pytest.raises(GoldenFileError, match="not a regular file"):
        load_golden(fifo)
    monkeypatch.setattr(golden_module, "MAX_GOLDEN_BYTES", 64)
    with pytest.raises(GoldenFileError, match="over 64 bytes"):
        load_golden(write_lines(tmp_path, GOOD, GOOD))
    monkeypatch.undo()
    # An editor's BOM, and a form feed and U+2028 inside a string: one line each.
    text = json.dumps({**GOOD, "must_contain": "a\x0cb\u2028c"}, ensure_ascii=False)
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode() + b"\n")
    (query,) = load_golden(path).queries
    assert query.must_contain == "a\x0cb\u2028c"


def test_valid_file_parses_with_defaults_and_page_only_lines(tmp_path: Path) -> None:
    page_only = {
        "query": "summarize this page",
        "page_url": "https://docs.example/nowhere",
        "expected_intent": "current_page",
        "expected_page_status": "not_indexed",
    }
    scoped = {**GOOD, "id": "q429", "top_k": 3, "locale": "en", "scope_id": ""}
    golden = load_golden(write_lines(tmp_path, GOOD, page_only, scoped))
    first, page, third = golden.queries
    assert (first.top_k, first.scope_id, first.ranked, first.label) == (5, None, True, "line 1")
    assert page.expected_doc_ids == () and not page.ranked
    assert (third.label, third.top_k, third.scope_id) == ("q429", 3, "")
    assert len(golden.sha256) == 64
    # An absent scope_id means the checked scope; "" means every scope.
    assert retrieve_request(first, "handbook").filter.scope_id == "handbook"
    assert retrieve_request(third, "handbook").filter.scope_id == ""
    assert retrieve_request(page, "handbook").page_url == "https://docs.example/nowhere"


def response(
    *doc_ids: str,
    evidence: str = "",
    intent: rpb.Intent.ValueType = rpb.INTENT_SITE_SEARCH,
    page_status: rpb.PageStatus.ValueType = rpb.PAGE_STATUS_UNSPECIFIED,
) -> rpb.RetrieveResponse:
    hits = [rpb.Hit(doc_id=d, rank=i) for i, d in enumerate(doc_ids, start=1)]
    return rpb.RetrieveResponse(
        hits=hits, evidence=rpb.Evidence(text=evidence), intent=intent, page_status=page_status
    )


def test_judge_records_rank_and_every_problem() -> None:
    query = GoldenQuery(line=4, query="q", expected_doc_ids=("b.md", "c.md"), must_contain="429")
    found = judge(query, response("a.md", "c.md", "b.md", evidence="[1] status 429"))
    assert found.passed and (found.rank, found.found_doc_id) == (2, "c.md")

    missing = judge(query, response("a.md", "d.md", evidence="nothing"))
    assert not missing.passed and missing.rank is None
    assert missing.problems == [
        "none of b.md, c.md in the top 5 (got a.md, d.md)",
        "evidence does not contain '429'",
    ]
    # A hit below top_k does not count even if the Retriever sent it.
    narrow = GoldenQuery(line=5, query="q", expected_doc_ids=("b.md",), top_k=1)
    assert not judge(narrow, response("a.md", "b.md")).passed


def test_judge_page_expectations() -> None:
    query = GoldenQuery(
        line=1,
        query="summarize this page",
        page_url="https://docs.example/nowhere",
        expected_intent="current_page",
        expected_page_status="not_indexed",
    )
    ok = response(intent=rpb.INTENT_CURRENT_PAGE, page_status=rpb.PAGE_STATUS_NOT_INDEXED)
    assert judge(query, ok).passed
    wrong = judge(query, response())
    assert wrong.problems == [
        "intent site_search, expected current_page",
        "page status unspecified, expected not_indexed",
    ]


def test_score_hit_at_1_and_mrr_over_ranked_queries_only() -> None:
    a = GoldenQuery(line=1, query="a", expected_doc_ids=("x",))
    page = GoldenQuery(line=2, query="p", page_url="u", expected_intent="current_page")
    outcomes = [
        judge(a, response("x")),  # rank 1
        judge(a, response("y", "y", "x")),  # rank 3
        judge(a, response("y")),  # missed
        judge(page, response(intent=rpb.INTENT_CURRENT_PAGE)),
    ]
    s = score(outcomes)
    assert (s.queries, s.passed, s.ranked_queries) == (4, 3, 3)
    assert s.pass_rate == 0.75
    assert s.hit_at_1 == round(1 / 3, 4)
    assert s.mrr == round((1 + 1 / 3 + 0) / 3, 4)
