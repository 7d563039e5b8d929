"""Golden queries for the release check: a JSONL file of questions whose
answers the index must keep finding, and how one Retrieve answer is judged.

Why a file of expectations and not an evaluation run: a release check has to
say yes or no about *this* index, today, with reasons a person can act on
("line 12: expected rate-limits.md in the top 5, got ..."), so every line
carries its own pass condition. The aggregate numbers (hit@1, MRR) are kept
in the record for trends, not for the verdict unless a threshold asks.

One object per line (blank lines are skipped):

    {"query": "what does status 429 mean", "expected_doc_ids": ["rate-limits.md"],
     "must_contain": "Retry-After", "top_k": 5}
    {"query": "summarize this page", "page_url": "https://docs.example/nowhere",
     "expected_intent": "current_page", "expected_page_status": "not_indexed"}

`expected_doc_ids` is required unless the line checks a page only. An absent
`scope_id` means the scope being checked; `"scope_id": ""` searches every scope.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.errors import InvalidArgument
from services.indexer.validation import DocumentLimits, check_scope_id
from services.sources.locale_detection import normalize_tag
from services.sources.site_walk import read_regular_file

DEFAULT_TOP_K = 5
MAX_TOP_K = 100
MAX_GOLDEN_BYTES = 16 * 1024 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
INTENTS = {"site_search": rpb.INTENT_SITE_SEARCH, "current_page": rpb.INTENT_CURRENT_PAGE}
PAGE_STATUSES = {
    "unspecified": rpb.PAGE_STATUS_UNSPECIFIED,
    "indexed": rpb.PAGE_STATUS_INDEXED,
    "not_indexed": rpb.PAGE_STATUS_NOT_INDEXED,
}
_INTENT_NAMES = {v: k for k, v in INTENTS.items()}
_PAGE_STATUS_NAMES = {v: k for k, v in PAGE_STATUSES.items()}
_FIELDS = frozenset(
    {
        "id",
        "query",
        "expected_doc_ids",
        "must_contain",
        "page_url",
        "expected_intent",
        "expected_page_status",
        "top_k",
        "locale",
        "scope_id",
    }
)


_Fail = Callable[[str, str], "GoldenFileError"]


class GoldenFileError(ValueError):
    """A golden file that cannot be used; names the line and the field so the
    operator can fix it without guessing (a typo must not silently pass)."""

    def __init__(self, path: Path, line: int, field_name: str, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {field_name}: {message}")
        self.line, self.field = line, field_name


@dataclass(frozen=True)
class GoldenQuery:
    line: int
    query: str
    expected_doc_ids: tuple[str, ...] = ()
    must_contain: str = ""
    page_url: str = ""
    expected_intent: str = ""
    expected_page_status: str = ""
    top_k: int = DEFAULT_TOP_K
    locale: str = ""
    scope_id: str | None = None  # None: the scope being checked
    id: str = ""

    @property
    def label(self) -> str:
        return self.id or f"line {self.line}"

    @property
    def ranked(self) -> bool:
        """Whether this line counts towards hit@1 and MRR."""
        return bool(self.expected_doc_ids)


@dataclass(frozen=True)
class GoldenFile:
    path: Path
    sha256: str
    queries: tuple[GoldenQuery, ...]


def load_golden(path: Path) -> GoldenFile:
    """Parse and validate the whole file before anything is asked of a service."""
    raw = _read_golden_bytes(path)
    try:
        text = raw.decode("utf-8-sig")  # an editor's BOM is not part of the first line
    except UnicodeDecodeError:
        raise GoldenFileError(path, 0, "file", "is not UTF-8") from None
    # "\n" only: str.splitlines also breaks at \x0c, \x1c and U+2028, which JSON
    # strings may hold, and would split one line into two broken ones.
    queries = [
        _parse_line(path, number, line)
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    ]
    if not queries:
        raise GoldenFileError(path, 0, "file", "holds no golden queries")
    return GoldenFile(path, hashlib.sha256(raw).hexdigest(), tuple(queries))


def _read_golden_bytes(path: Path) -> bytes:
    """The file's bytes, read as the folder loader reads a page: a regular
    file (a FIFO would block the check forever) of at most MAX_GOLDEN_BYTES.
    A link is followed first: the operator named the file."""
    try:
        raw, _ = read_regular_file(path.resolve(), max_bytes=MAX_GOLDEN_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            reason = f"is over {MAX_GOLDEN_BYTES} bytes, the limit"
        elif exc.errno == errno.EINVAL:
            reason = "is not a regular file"
        else:
            reason = f"cannot be read ({exc.strerror})"
        raise GoldenFileError(path, 0, "file", reason) from None
    return raw


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        twice = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"field {twice!r} appears twice")
    return dict(pairs)


def _parse_line(path: Path, number: int, line: str) -> GoldenQuery:
    def fail(name: str, message: str) -> GoldenFileError:
        return GoldenFileError(path, number, name, message)

    obj = _json_object(line, fail)
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise fail(unknown[0], f"unknown field (known: {', '.join(sorted(_FIELDS))})")
    query = _string(obj, "query", fail, required=True)
    if not query.strip():
        raise fail("query", "must not be empty")
    page_url = _string(obj, "page_url", fail)
    intent = _choice(obj, "expected_intent", INTENTS, fail)
    status = _choice(obj, "expected_page_status", PAGE_STATUSES, fail)
    for name in ("expected_intent", "expected_page_status"):
        if name in obj and not page_url:
            raise fail(name, "needs page_url (page expectations check a page)")
    doc_ids = _doc_ids(obj, fail, page_checks=bool(intent or status))
    return GoldenQuery(
        line=number,
        query=query,
        expected_doc_ids=doc_ids,
        must_contain=_string(obj, "must_contain", fail, non_empty=True),
        page_url=page_url,
        expected_intent=intent,
        expected_page_status=status,
        top_k=_top_k(obj, fail),
        locale=_locale(obj, fail),
        scope_id=_scope(obj, fail),
        id=_string(obj, "id", fail),
    )


def _json_object(line: str, fail: Callable[[str, str], GoldenFileError]) -> dict[str, Any]:
    """The line as one JSON object, or the reason it is not one."""
    try:
        obj = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise fail("line", f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise fail("line", "nested too deeply to be a golden query") from None
    except ValueError as exc:  # from _unique_keys: the last value would win silently
        raise fail("line", str(exc)) from None
    if not isinstance(obj, dict):
        raise fail("line", f"must be a JSON object, not {type(obj).__name__}")
    return obj


def _string(
    obj: dict[str, Any], name: str, fail: _Fail, *, required: bool = False, non_empty: bool = False
) -> str:
    if name not in obj:
        if required:
            raise fail(name, "is required")
        return ""
    value = obj[name]
    if not isinstance(value, str):
        raise fail(name, f"must be a string, not {type(value).__name__}")
    _check_text(value, name, fail)
    if non_empty and not value:
        raise fail(name, "must not be empty (leave the field out instead)")
    return value


def _check_text(value: str, name: str, fail: _Fail) -> None:
    """A `\\ud800` escape decodes to a lone surrogate, which no request can carry."""
    if (found := _SURROGATE.search(value)) is not None:
        raise fail(name, f"holds a lone surrogate (U+{ord(found.group()):04X}), not text")


def _locale(obj: dict[str, Any], fail: _Fail) -> str:
    value = _string(obj, "locale", fail)
    if value and normalize_tag(value) is None:
        raise fail("locale", f"{value!r} is not a language tag like 'en' or 'zh-CN'")
    return value


def _scope(obj: dict[str, Any], fail: _Fail) -> str | None:
    if "scope_id" not in obj:
        return None
    value = _string(obj, "scope_id", fail)
    if value:  # "" searches every scope
        try:
            check_scope_id("scope_id", value, DocumentLimits())
        except InvalidArgument as exc:
            raise fail("scope_id", str(exc).removeprefix("scope_id: ")) from None
    return value


def _choice(obj: dict[str, Any], name: str, allowed: Collection[str], fail: _Fail) -> str:
    value = _string(obj, name, fail)
    if name in obj and value not in allowed:
        raise fail(name, f"{value!r} is not one of {', '.join(sorted(allowed))}")
    return value


def _doc_ids(obj: dict[str, Any], fail: _Fail, *, page_checks: bool) -> tuple[str, ...]:
    value = obj.get("expected_doc_ids")
    if value is None:
        if page_checks:
            return ()
        raise fail("expected_doc_ids", "is required unless the line only checks a page")
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail("expected_doc_ids", "must be a list of non-empty strings")
    for doc_id in value:
        _check_text(doc_id, "expected_doc_ids", fail)
    if not value and not page_checks:
        raise fail("expected_doc_ids", "must name at least one document")
    return tuple(value)


def _top_k(obj: dict[str, Any], fail: _Fail) -> int:
    value = obj.get("top_k", DEFAULT_TOP_K)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K:
        raise fail("top_k", f"must be an integer from 1 to {MAX_TOP_K}, not {value!r}")
    return value


def retrieve_request(query: GoldenQuery, scope_id: str) -> rpb.RetrieveRequest:
    """The request as the public path would send it: no forced intent, so the
    routing rules are part of what is checked."""
    scope = scope_id if query.scope_id is None else query.scope_id
    return rpb.RetrieveRequest(
        query=query.query,
        top_k=query.top_k,
        page_url=query.page_url,
        filter=rpb.ScopeFilter(scope_id=scope, locale=query.locale),
    )


@dataclass
class QueryOutcome:
    """What one golden query got, and every reason it did not pass."""

    line: int
    label: str
    query: str
    passed: bool
    rank: int | None = None  # 1-based rank of the first expected document's hit
    found_doc_id: str = ""
    hit_doc_ids: list[str] = field(default_factory=list)
    intent: str = ""
    page_status: str = ""
    degraded: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ranked: bool = True


def judge(query: GoldenQuery, response: rpb.RetrieveResponse) -> QueryOutcome:
    hits = [h for h in response.hits if h.rank <= query.top_k]
    outcome = QueryOutcome(
        line=query.line,
        label=query.label,
        query=query.query,
        passed=False,
        hit_doc_ids=[h.doc_id for h in hits],
        intent=_INTENT_NAMES.get(response.intent, "unspecified"),
        page_status=_PAGE_STATUS_NAMES.get(response.page_status, "unspecified"),
        degraded=[f"{d.component}: {d.reason}" for d in response.degraded],
        ranked=query.ranked,
    )
    _judge_documents(query, hits, outcome)
    if query.must_contain and query.must_contain not in response.evidence.text:
        outcome.problems.append(f"evidence does not contain {query.must_contain!r}")
    if query.expected_intent and outcome.intent != query.expected_intent:
        outcome.problems.append(f"intent {outcome.intent}, expected {query.expected_intent}")
    if query.expected_page_status and outcome.page_status != query.expected_page_status:
        outcome.problems.append(
            f"page status {outcome.page_status}, expected {query.expected_page_status}"
        )
    outcome.passed = not outcome.problems
    return outcome


def _judge_documents(query: GoldenQuery, hits: list[rpb.Hit], outcome: QueryOutcome) -> None:
    if not query.expected_doc_ids:
        return
    wanted = set(query.expected_doc_ids)
    first = next((h for h in hits if h.doc_id in wanted), None)
    if first is None:
        got = ", ".join(dict.fromkeys(outcome.hit_doc_ids)) or "no hits"
        outcome.problems.append(
            f"none of {', '.join(query.expected_doc_ids)} in the top {query.top_k} (got {got})"
        )
        return
    outcome.rank, outcome.found_doc_id = first.rank, first.doc_id


def failed_call(query: GoldenQuery, error: str) -> QueryOutcome:
    """A query whose Retrieve failed counts as failed, with the status as the reason."""
    return QueryOutcome(
        line=query.line,
        label=query.label,
        query=query.query,
        passed=False,
        problems=[f"retrieve failed: {error}"],
        ranked=query.ranked,
    )


@dataclass(frozen=True)
class GoldenScores:
    queries: int
    passed: int
    pass_rate: float
    ranked_queries: int  # lines with expected_doc_ids: what hit@1 and MRR average over
    hit_at_1: float
    mrr: float


def exact_mrr(outcomes: list[QueryOutcome]) -> float:
    """MRR over the lines with expected ids, unrounded (what thresholds compare)."""
    ranked = [o for o in outcomes if o.ranked]
    return sum(1 / o.rank if o.rank else 0.0 for o in ranked) / len(ranked) if ranked else 0.0


def score(outcomes: list[QueryOutcome]) -> GoldenScores:
    """The record's figures, rounded for reading; thresholds compare exact ones."""
    ranked = [o for o in outcomes if o.ranked]
    passed = sum(o.passed for o in outcomes)
    return GoldenScores(
        queries=len(outcomes),
        passed=passed,
        pass_rate=round(passed / len(outcomes), 4) if outcomes else 0.0,
        ranked_queries=len(ranked),
        hit_at_1=round(sum(o.rank == 1 for o in ranked) / len(ranked), 4) if ranked else 0.0,
        mrr=round(exact_mrr(outcomes), 4),
    )
