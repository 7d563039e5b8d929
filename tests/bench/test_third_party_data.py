"""The third-party question set as shipped, and how its index is chosen:
one rendering per page, distractors that are the same on every machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.common.paths import DATASETS_DIR
from bench.eval.third_party_data import (
    corpus_listing,
    distractors,
    one_rendering,
    parse_query,
    read_queries,
    staged_subset,
    text_source,
)

pytestmark = pytest.mark.unit

QUERIES = DATASETS_DIR / "third_party" / "queries.jsonl"


SPLIT_BY_POSITION = 69


def test_the_shipped_questions_are_enough_split_and_never_name_their_answer() -> None:
    queries = read_queries(QUERIES)  # strict: fields, splits, duplicate ids
    test = [q for q in queries if q.split == "test"]
    assert len(queries) >= 50 and len(test) >= 40
    # The first 69 are split by position (1 modulo 3: train); the questions
    # added after them are train only, so the test split stays the one of record.
    first, added = queries[:SPLIT_BY_POSITION], queries[SPLIT_BY_POSITION:]
    assert [q.split == "train" for q in first] == [i % 3 == 1 for i in range(len(first))]
    assert all(q.split == "train" for q in added)
    assert {q.source for q in queries} >= {"python3-doc", "git-doc", "npm-docs"}
    for query in queries:
        assert all(doc.startswith(f"{query.source}/") for doc in query.relevant)
        assert one_rendering(query.relevant) == sorted(query.relevant)  # the indexed rendering
        words = set(re.findall(r"[a-z0-9_.-]+", query.text.lower()))
        assert query.answer.lower() not in words, query.id


def test_queries_are_read_strictly() -> None:
    record = {"id": "x", "source": "git-doc", "query": "q", "relevant": {"git-doc/a.html": 2}}
    assert parse_query({**record, "split": "train"}, "l").split == "train"
    with pytest.raises(ValueError, match="split 'tset'"):
        parse_query({**record, "split": "tset"}, "line 1")
    with pytest.raises(ValueError, match="missing split"):
        parse_query(record, "line 1")
    with pytest.raises(ValueError, match="no page judged relevant"):
        parse_query({**record, "split": "test", "relevant": {"git-doc/a.html": 0}}, "line 1")


def test_text_source_is_the_rest_or_asciidoc_beside_the_html(tmp_path: Path) -> None:
    for relpath in ("python3-doc/_sources/library/os.rst.txt", "git-doc/git-log.txt"):
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_text("Title\n=====\n")
    assert text_source(tmp_path, "python3-doc/library/os.html") == (
        "python3-doc/_sources/library/os.rst.txt"
    )
    assert text_source(tmp_path, "git-doc/git-log.html") == "git-doc/git-log.txt"
    assert text_source(tmp_path, "git-doc/git-stash.html") is None  # no source staged
    assert text_source(tmp_path, "npm-docs/docs/content/commands/npm-ci.md") is None


def test_one_rendering_per_page_keeps_the_html_or_markdown_form() -> None:
    listing = [
        "python3-doc/library/os.html",
        "python3-doc/_sources/library/os.rst.txt",
        "git-doc/git-log.html",
        "git-doc/git-log.txt",
        "git-doc/config.txt",  # no HTML twin: kept
        "npm-docs/docs/content/commands/npm-ci.md",
        "npm-docs/docs/output/commands/npm-ci.html",
        "markdownlint/doc/md001.md",
        "markdownlint/schema/markdownlint-config-schema.json",  # not a page
    ]
    assert one_rendering(listing) == [
        "git-doc/config.txt",
        "git-doc/git-log.html",
        "markdownlint/doc/md001.md",
        "npm-docs/docs/content/commands/npm-ci.md",
        "python3-doc/library/os.html",
    ]


def test_distractors_take_sources_in_turns_skip_judged_and_large_pages(tmp_path: Path) -> None:
    pages = tmp_path / "pages"
    for source, count in (("a", 6), ("b", 2)):
        for n in range(count):
            (pages / source).mkdir(parents=True, exist_ok=True)
            (pages / source / f"p{n}.md").write_text("# page\n\ntext\n")
    (pages / "a" / "huge.md").write_text("x" * 5000)
    (pages / "a" / ".hidden.md").write_text("hidden")
    listing = corpus_listing(pages)
    assert ".hidden.md" not in " ".join(listing) and len(listing) == 9
    picked = distractors(pages, listing, {"a/p0.md"}, 6, max_bytes=1000)
    assert picked == distractors(pages, list(reversed(listing)), {"a/p0.md"}, 6, max_bytes=1000)
    assert "a/p0.md" not in picked and "a/huge.md" not in picked
    assert [p.split("/")[0] for p in picked[:4]] == ["a", "b", "a", "b"]
    assert len(picked) == 6
    staged = staged_subset(pages, picked, tmp_path / "stage")
    assert sorted(corpus_listing(staged)) == sorted(picked)
