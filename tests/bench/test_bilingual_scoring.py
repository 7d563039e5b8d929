"""The bilingual evaluation's definitions: what a single answer earns, how
kinds are grouped, how settings name an index and how variants are kept."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.common.paths import DATASETS_DIR
from bench.eval.bilingual import assess, index_dir, parse_env, record_variant
from bench.eval.bilingual_data import (
    CROSS_KINDS,
    SPLITS,
    BilingualDataset,
    Query,
    cjk_characters,
    parse_query,
    smoke_queries,
    split_queries,
)
from bench.eval.bilingual_scoring import Outcome, failures, group_metrics, summarize
from services.core.analysis.analyzer import TextAnalyzer

pytestmark = pytest.mark.unit

IDENT = Query("q1", "identifier", "RATE_LIMITED", {"en/a.md": 2, "en/b.md": 1}, "RATE_LIMITED")
ZH = Query("q2", "zh_question", "怎么申请提高限额", {"zh-CN/a.md": 1, "zh-CN/b.md": 0})
ZH_EN = Query("q3", "cross_zh_en", "账单几号出", {"en/billing.md": 2})
EN_ZH = Query("q4", "cross_en_zh", "can it run without graphics cards", {"zh-CN/deploy.md": 2})
TOP3_KINDS = ("zh_question", "cross_zh_en", "cross_en_zh")


def test_identifier_hit_at_1_is_the_identifier_in_the_rank_1_text() -> None:
    found = Outcome(IDENT, ("en/other.md", "en/a.md"), "code `rate_limited` means", 3)
    assert found.exact1 is True and found.hit1 is True  # case-insensitive, any page
    assert found.top3 is True and found.reciprocal_rank == 0.5 and found.recall == 0.5
    missed = Outcome(IDENT, ("en/a.md",), "the limits per plan", 3)
    assert missed.exact1 is False and missed.hit1 is False and missed.reciprocal_rank == 1.0


def test_other_queries_hit_at_1_by_a_relevant_page_and_grade_0_is_not_relevant() -> None:
    assert Outcome(ZH, ("zh-CN/a.md",), "…", 5).hit1 is True
    assert Outcome(ZH, ("zh-CN/b.md",), "…", 5).hit1 is False
    assert Outcome(ZH, ("zh-CN/b.md",), "…", 5).exact1 is None
    later = Outcome(ZH, ("x", "x", "y", "zh-CN/a.md"), "…", 0)
    assert later.top3 is False and later.reciprocal_rank == 0.25 and later.recall == 1.0
    assert later.lexical_nonempty is False
    assert Outcome(ZH, (), "", None).lexical_nonempty is None  # channel not asked for


def test_means_skip_undefined_values_and_groups_follow_the_kinds() -> None:
    outcomes = [
        Outcome(IDENT, ("en/a.md",), "RATE_LIMITED", 1),
        Outcome(ZH, ("zh-CN/a.md",), "…", 0),
    ]
    summary = summarize(outcomes)
    assert summary["queries"] == 2 and summary["exact_queries"] == 1
    assert summary["exact@1"] == 1.0 and summary["hit@1"] == 1.0
    assert summary["lexical_nonempty"] == 0.5
    groups = group_metrics(outcomes)
    assert list(groups) == ["identifier", "zh_question", "identifier kinds", "all"]
    assert groups["zh_question"]["exact@1"] is None
    assert failures(outcomes) == []
    miss = failures([Outcome(ZH, ("zh-CN/b.md",), "第一段\n文字", 2)])
    assert miss[0]["rank1_doc"] == "zh-CN/b.md" and miss[0]["rank1_text"] == "第一段 文字"


def test_queries_are_read_strictly_and_smoke_takes_each_kind() -> None:
    with pytest.raises(ValueError, match="kind 'identifer'"):
        parse_query({"id": "x", "kind": "identifer", "query": "q", "relevant": {}}, "line 1")
    with pytest.raises(ValueError, match="missing relevant"):
        parse_query({"id": "x", "kind": "mixed", "query": "q"}, "line 1")
    chosen = smoke_queries([IDENT, IDENT, IDENT, ZH], per_kind=2)
    assert [q.kind for q in chosen] == ["identifier", "identifier", "zh_question"]


def test_each_set_of_settings_has_its_own_index_and_variants_are_kept(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    env = parse_env(["RAG_B=2", "RAG_A=1"], parser)
    assert list(env) == ["RAG_A", "RAG_B"]
    assert index_dir(tmp_path, "bilingual", env) == index_dir(tmp_path, "bilingual", dict(env))
    assert index_dir(tmp_path, "bilingual", env) != index_dir(tmp_path, "bilingual", {})
    assert index_dir(tmp_path, "bilingual", {}).name.startswith("bilingual-")
    with pytest.raises(SystemExit):
        parse_env(["lower=1"], parser)
    path = tmp_path / "bilingual.json"
    record_variant(path, {"variant": "default", "n": 1})
    record_variant(path, {"variant": "bigram", "n": 2})
    record_variant(path, {"variant": "default", "n": 3})
    variants = json.loads(path.read_text())["variants"]
    assert variants == {
        "default": {"variant": "default", "n": 3},
        "bigram": {"variant": "bigram", "n": 2},
    }


def test_cross_language_queries_are_read_strictly() -> None:
    def record(kind: str, text: str, relevant: dict[str, int]) -> dict[str, object]:
        return {"id": "x", "kind": kind, "query": text, "relevant": relevant}

    ok = parse_query(record("cross_zh_en", "账单几号出", {"en/billing.md": 2}), "line 1")
    assert ok.kind == "cross_zh_en"
    parse_query(record("cross_en_zh", "when is the bill issued", {"zh-CN/b.md": 2}), "line 1")
    with pytest.raises(ValueError, match="Latin letters or digits"):
        parse_query(record("cross_zh_en", "API 账单几号出", {"en/billing.md": 2}), "line 1")
    with pytest.raises(ValueError, match="Latin letters or digits"):
        parse_query(record("cross_zh_en", "账单１号出吗", {"en/billing.md": 2}), "line 1")
    with pytest.raises(ValueError, match="Chinese characters"):
        parse_query(record("cross_en_zh", "what is 灰度", {"zh-CN/b.md": 2}), "line 1")
    with pytest.raises(ValueError, match=r"outside en: zh-CN/billing\.md"):
        relevant = {"en/billing.md": 2, "zh-CN/billing.md": 1}
        parse_query(record("cross_zh_en", "账单几号出", relevant), "line 1")
    with pytest.raises(ValueError, match="no relevant page"):
        parse_query(record("cross_en_zh", "when is the bill issued", {}), "line 1")


def test_cross_language_kinds_are_grouped_and_targeted_per_direction() -> None:
    hybrid = [
        Outcome(IDENT, ("en/a.md",), "RATE_LIMITED", 1),
        Outcome(ZH_EN, ("zh-CN/x.md", "en/billing.md"), "…", 0),
        Outcome(EN_ZH, ("en/x.md", "en/y.md", "en/z.md", "zh-CN/deploy.md"), "…", 2),
    ]
    groups = group_metrics(hybrid)
    assert list(groups) == ["identifier", "cross_zh_en", "cross_en_zh", "identifier kinds", "all"]
    assert groups["cross_zh_en"]["top3"] == 1.0 and groups["cross_en_zh"]["top3"] == 0.0
    targets = assess({"hybrid": hybrid, "lexical": hybrid}, cjk_characters("账单几号出"))
    by_kind = {k: next(t for t in targets if t["what"].startswith(k)) for k in TOP3_KINDS}
    assert by_kind["cross_zh_en"]["met"] is True and by_kind["cross_zh_en"]["threshold"] == 0.8
    assert by_kind["cross_en_zh"]["met"] is False
    assert by_kind["cross_en_zh"]["verdict"] == "missed by 0.8 (100% of the target)"
    assert by_kind["zh_question"]["verdict"] == "not measured"  # no such query in this run
    chosen = smoke_queries([IDENT, ZH_EN, ZH_EN, ZH_EN, EN_ZH], per_kind=2)
    assert [q.kind for q in chosen] == ["identifier", "cross_zh_en", "cross_zh_en", "cross_en_zh"]


def test_the_data_set_judges_existing_pages_and_crosses_languages() -> None:
    """The shipped data set: every judged page exists, every page is judged
    relevant somewhere, each cross-language direction has its 20 queries, and
    none of them can reach its answer through a shared word."""
    dataset = BilingualDataset(DATASETS_DIR / "bilingual")
    queries = dataset.queries()  # strict: kinds, duplicates, cross-language rules
    pages = {str(path.relative_to(dataset.pages)) for path in dataset.pages.glob("*/*.md")}
    judged = {doc for query in queries for doc in query.relevant_docs}
    assert judged <= pages
    assert pages <= judged
    for kind in CROSS_KINDS:
        assert sum(q.kind == kind for q in queries) >= 20
    # A cross-language question shares no term with the pages that answer it,
    # as the lexical channel analyses both: only the crossing can find them.
    analyzer = TextAnalyzer()
    terms = {
        doc: {token.term for token in analyzer.tokens((dataset.pages / doc).read_text())}
        for doc in judged
    }
    shared = {
        (q.id, doc): sorted(set(analyzer.plan(q.text).terms) & terms[doc])
        for q in queries
        if q.kind in CROSS_KINDS
        for doc in q.relevant_docs
    }
    assert {pair: found for pair, found in shared.items() if found} == {}


def test_every_query_is_in_one_split_and_every_kind_trains_on_about_a_third() -> None:
    """The split the fitting relies on: explicit on every shipped query,
    stratified by kind, and strictly read (a typo is not a silent test query)."""
    lines = (DATASETS_DIR / "bilingual" / "queries.jsonl").read_text(encoding="utf-8")
    assert all(json.loads(line).get("split") in SPLITS for line in lines.splitlines())
    queries = BilingualDataset(DATASETS_DIR / "bilingual").queries()
    for kind in {query.kind for query in queries}:
        of_kind = [query for query in queries if query.kind == kind]
        trained = len(split_queries(of_kind, "train"))
        assert len(of_kind) // 3 <= trained <= len(of_kind) // 3 + 1
    with pytest.raises(ValueError, match="split 'tran'"):
        parse_query(
            {"id": "x", "kind": "mixed", "split": "tran", "query": "q", "relevant": {}}, "l"
        )
    unsplit = parse_query({"id": "x", "kind": "mixed", "query": "q", "relevant": {}}, "line 1")
    assert unsplit.split == "test"
