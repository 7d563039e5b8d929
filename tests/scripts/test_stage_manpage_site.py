"""The man-page question set and its site plan: every question parses under
the bilingual set's strict rules (kinds, splits, cross-language scripts),
judges only pages the site stages, and a same-language question only pages in
its own language; and, where mandoc and the Debian pages are installed, a
staged page is UTF-8 HTML with its language."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.eval.bilingual_data import parse_query
from scripts.stage_manpage_site import DATASET, manual_page, planned_pages, render, stage

pytestmark = pytest.mark.unit

SITE = json.loads((DATASET / "site.json").read_text(encoding="utf-8"))


def _queries() -> list[dict[str, object]]:
    lines = (DATASET / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_question_parses_and_judges_staged_pages() -> None:
    staged = {f"{locale}/{section}/{name}.html" for locale, section, name in planned_pages(SITE)}
    queries = [parse_query(record, str(record["id"])) for record in _queries()]
    assert len({q.id for q in queries}) == len(queries) == 58
    assert {q.split for q in queries} == {"train", "test"}
    for query in queries:
        assert set(query.relevant) <= staged, query.id
        own = {"zh_question": "zh-CN/", "en_question": "en/"}.get(query.kind)
        if own:
            assert all(doc.startswith(own) for doc in query.relevant), query.id


def test_one_language_pages_exist_in_that_language_only() -> None:
    pages = planned_pages(SITE)
    both = {(s, n) for s, names in SITE["both"].items() for n in names}
    assert len(pages) == 2 * len(both) + sum(
        len(names) for group in ("en", "zh-CN") for names in SITE[group].values()
    )
    for group in ("en", "zh-CN"):
        for section, names in SITE[group].items():
            assert not both & {(section, n) for n in names}


@pytest.mark.skipif(shutil.which("mandoc") is None, reason="mandoc is not installed")
def test_a_staged_chinese_page_is_utf8_html_with_its_language() -> None:
    try:
        source = manual_page("zh-CN", "1", "du")
    except FileNotFoundError:
        pytest.skip("manpages-zh is not installed")
    page = render(source, "zh-CN")
    assert page.startswith("<!DOCTYPE html>") and '<html lang="zh-CN">' in page
    assert "&#x" not in page  # characters, not references
    assert "磁盘" in page


def test_the_roff_site_judges_the_same_pages_by_their_source_names(tmp_path: Path) -> None:
    """`--roff` stages the pages' own sources (read by the loader's roff
    reader); each question is judged on the same pages under those names."""
    try:
        manual_page("zh-CN", "1", "du")
        count = stage(tmp_path, roff=True)
    except FileNotFoundError:
        pytest.skip("the Debian manual pages are not installed")
    assert count == len(planned_pages(SITE))
    staged = {str(p.relative_to(tmp_path / "pages")) for p in (tmp_path / "pages").rglob("*.*")}
    assert "zh-CN/1/du.1.gz" in staged and not any(name.endswith(".html") for name in staged)
    lines = (tmp_path / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    for original, record in zip(_queries(), map(json.loads, lines), strict=True):
        assert set(record["relevant"]) <= staged, record["id"]
        assert len(record["relevant"]) == len(original["relevant"])  # type: ignore[arg-type]
