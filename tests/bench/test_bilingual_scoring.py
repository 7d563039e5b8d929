"""The bilingual evaluation's definitions: what a single answer earns, how
kinds are grouped, how settings name an index and how variants are kept."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.eval.bilingual import index_dir, parse_env, record_variant
from bench.eval.bilingual_data import Query, parse_query, smoke_queries
from bench.eval.bilingual_scoring import Outcome, failures, group_metrics, summarize

pytestmark = pytest.mark.unit

IDENT = Query("q1", "identifier", "RATE_LIMITED", {"en/a.md": 2, "en/b.md": 1}, "RATE_LIMITED")
ZH = Query("q2", "zh_question", "怎么申请提高限额", {"zh-CN/a.md": 1, "zh-CN/b.md": 0})


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
