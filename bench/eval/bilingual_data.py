"""The bilingual data set: English and Chinese pages, and judged queries
that name identifiers, ask in Chinese, or mix the two.

Layout (bench/datasets/bilingual/):

    pages/<locale>/**/*.md      document id = path relative to pages/,
                                locale = its first folder (en, zh-CN)
    queries.jsonl               {"id", "kind", "split"?, "query",
                                 "relevant": {doc_id: grade}, "must_contain"?}

`kind` is one of KINDS; `split` is one of SPLITS (a query without one is a
test query: fitting must never see it); `must_contain` is an identifier the rank-1 chunk must
contain (case-insensitive): set on the identifier kinds, optional on mixed.
The two cross-language kinds (CROSS_KINDS) ask in one language about an
answer that exists only in the other: `cross_zh_en`, a Chinese question (no
Latin letters, no digits) judged against English pages only; `cross_en_zh`, an
English question (no Chinese) judged against Chinese pages only.
The files are read strictly (unknown kinds, duplicate ids, missing fields, a
cross-language query written in the wrong script or judged against a page in
its own language stop the run) so a typo in the data set never turns into a
silent miss.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from services.core.models import Document

KINDS = (
    "identifier",
    "identifier_sentence",
    "zh_question",
    "en_question",  # an English question answered on an English page (the man-page set)
    "mixed",
    "cross_zh_en",
    "cross_en_zh",
)
IDENTIFIER_KINDS = ("identifier", "identifier_sentence")
# Thresholds and weights are fitted on "train" and reported on "test".
SPLITS = ("train", "test")
# Cross-language kinds: (the question's language, the language of every page
# judged relevant), as the first part of a locale folder (`zh-CN` -> `zh`).
CROSS_KINDS: dict[str, tuple[str, str]] = {
    "cross_zh_en": ("zh", "en"),
    "cross_en_zh": ("en", "zh"),
}
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]")


@dataclass(frozen=True)
class Query:
    id: str
    kind: str
    text: str
    relevant: dict[str, int]
    must_contain: str = ""
    split: str = "test"

    @property
    def relevant_docs(self) -> frozenset[str]:
        """Documents judged relevant (grade above 0)."""
        return frozenset(doc for doc, grade in self.relevant.items() if grade > 0)


@dataclass(frozen=True)
class BilingualDataset:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def pages(self) -> Path:
        return self.root / "pages"

    @property
    def queries_path(self) -> Path:
        return self.root / "queries.jsonl"

    def check(self) -> None:
        if not self.pages.is_dir() or not self.queries_path.is_file():
            raise FileNotFoundError(f"{self.root}: expected pages/<locale>/*.md and queries.jsonl")

    def documents(self, scope: str) -> tuple[list[Document], list[str]]:
        """Every page as the folder loader reads it, its id relative to pages/
        and its locale from the first folder; and the pages it could not read."""
        from services.sources.loaders import LoadError, load_directory

        documents, unreadable = [], []
        for item in load_directory(self.pages, scope_id=scope):
            if isinstance(item, LoadError):
                unreadable.append(f"{item.source}: {item.reason}")
            elif "/" not in item.doc_id:
                unreadable.append(f"{item.doc_id}: not inside a locale folder")
            else:
                documents.append(replace(item, locale=item.doc_id.split("/", 1)[0]))
        return documents, unreadable

    def queries(self) -> list[Query]:
        lines = self.queries_path.read_text(encoding="utf-8").splitlines()
        queries = [
            parse_query(json.loads(line), f"{self.queries_path.name}:{number}")
            for number, line in enumerate(lines, 1)
            if line.strip()
        ]
        seen: set[str] = set()
        for query in queries:
            if query.id in seen:
                raise ValueError(f"{self.queries_path}: query id {query.id!r} appears twice")
            seen.add(query.id)
        return queries


def parse_query(record: dict[str, Any], where: str) -> Query:
    missing = [key for key in ("id", "kind", "query", "relevant") if key not in record]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    if record["kind"] not in KINDS:
        raise ValueError(f"{where}: kind {record['kind']!r} is not one of {', '.join(KINDS)}")
    relevant = record["relevant"]
    if not isinstance(relevant, dict):
        raise ValueError(f"{where}: relevant must be an object {{doc_id: grade}}")
    split = str(record.get("split") or "test")
    if split not in SPLITS:
        raise ValueError(f"{where}: split {split!r} is not one of {', '.join(SPLITS)}")
    query = Query(
        id=str(record["id"]),
        kind=record["kind"],
        text=str(record["query"]),
        relevant={str(doc): int(grade) for doc, grade in relevant.items()},
        must_contain=str(record.get("must_contain") or ""),
        split=split,
    )
    if problem := cross_language_problem(query):
        raise ValueError(f"{where}: {problem}")
    return query


def cross_language_problem(query: Query) -> str:
    """Why a cross-language query breaks its kind's rules ("" when it does not):
    its text must be in the question's language only, and every page judged
    relevant must be in the other language (a page in the question's own
    language that answers means the query does not cross languages)."""
    if query.kind not in CROSS_KINDS:
        return ""
    asked_in, answered_in = CROSS_KINDS[query.kind]
    if asked_in == "zh" and _LATIN_OR_DIGIT.search(query.text):
        return f"{query.kind} query {query.id!r} contains Latin letters or digits"
    if asked_in == "en" and cjk_characters(query.text):
        return f"{query.kind} query {query.id!r} contains Chinese characters"
    if not query.relevant_docs:
        return f"{query.kind} query {query.id!r} has no relevant page"
    wrong = ", ".join(sorted(doc for doc in query.relevant if doc_language(doc) != answered_in))
    if wrong:
        return f"{query.kind} query {query.id!r} judges pages outside {answered_in}: {wrong}"
    return ""


def doc_language(doc_id: str) -> str:
    """`zh-CN/rerank.md` -> `zh`: the language part of the locale folder."""
    return doc_id.split("/", 1)[0].split("-", 1)[0].lower()


def smoke_queries(queries: Sequence[Query], per_kind: int = 2) -> list[Query]:
    """The first `per_kind` queries of each kind: every kind's code path in seconds."""
    taken: dict[str, int] = {}
    chosen = []
    for query in queries:
        if taken.get(query.kind, 0) < per_kind:
            taken[query.kind] = taken.get(query.kind, 0) + 1
            chosen.append(query)
    return chosen


def split_queries(queries: Sequence[Query], split: str) -> list[Query]:
    """The queries of one split ("train" or "test"), in file order."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    return [query for query in queries if query.split == split]


def query_counts(queries: Sequence[Query]) -> dict[str, int]:
    """Queries per kind, in KINDS order, kinds present only."""
    counts = {kind: sum(q.kind == kind for q in queries) for kind in KINDS}
    return {kind: n for kind, n in counts.items() if n}


def cjk_characters(text: str) -> set[str]:
    return set(_CJK.findall(text))


def unknown_judgments(queries: Iterable[Query], documents: Iterable[Document]) -> list[str]:
    """`query id: doc id` for each judgment naming a page the data set lacks:
    such a document can never be found, which the results should say."""
    known = {doc.doc_id for doc in documents}
    return [f"{q.id}: {doc}" for q in queries for doc in sorted(q.relevant) if doc not in known]
