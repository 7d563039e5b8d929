"""`python -m bench.eval.bilingual --smoke`, run as the command itself (a
subprocess starting the real stack) on a tiny bilingual corpus written here,
so the test depends on the command and not on the data set's content."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.eval.bilingual_data import KINDS
from bench.eval.bilingual_scoring import METRICS
from tests.support.bench_command import COMMAND_TIMEOUT_S, run_bench_module

# The hang guard covers the command's own limit (tests/support/bench_command.py).
pytestmark = [
    pytest.mark.integration,
    pytest.mark.bench_smoke,
    pytest.mark.timeout(COMMAND_TIMEOUT_S + 300),
]

PAGES = {
    "en/limits.md": "# Rate limits\n\nEach project may send 60 requests a minute. A request "
    "over the limit is refused with `FROBNICATE_QUOTA_SPENT` and may be retried later.\n",
    "en/keys.md": "# API keys\n\nCreate a key in the console and send it in the Authorization "
    "header. Keys expire after one year unless they are renewed.\n",
    "zh-CN/limits.md": "# 限流\n\n每个项目每分钟最多发送六十个请求。"
    "超过限额的请求会被拒绝，稍后可以重试。\n",
    "zh-CN/keys.md": "# 密钥\n\n在控制台创建密钥，并放在请求头中发送。"
    "密钥一年后过期，续期后继续有效。\n",
    # One page in each language with no counterpart: the cross-language kinds' answers.
    "en/invoices.md": "# Invoices\n\nInvoices are issued on the first day of each month and "
    "charged to the card on file three days later.\n",
    "zh-CN/deploy.md": "# 私有化部署\n\n私有化部署至少需要三台服务器，其中一台用作网关。\n",
}
QUERIES = [
    {
        "id": "ident",
        "kind": "identifier",
        "query": "FROBNICATE_QUOTA_SPENT",
        "relevant": {"en/limits.md": 2},
        "must_contain": "FROBNICATE_QUOTA_SPENT",
    },
    {
        "id": "sentence",
        "kind": "identifier_sentence",
        "query": "what does FROBNICATE_QUOTA_SPENT mean",
        "relevant": {"en/limits.md": 2},
        "must_contain": "FROBNICATE_QUOTA_SPENT",
    },
    {
        "id": "zh",
        "kind": "zh_question",
        "query": "密钥什么时候过期",
        "relevant": {"zh-CN/keys.md": 2},
    },
    {
        "id": "en",
        "kind": "en_question",
        "query": "when do API keys expire",
        "relevant": {"en/keys.md": 2},
    },
    {
        "id": "mixed",
        "kind": "mixed",
        "query": "请求 limit 是多少",
        "relevant": {"zh-CN/limits.md": 1},
    },
    {
        "id": "zh-en",
        "kind": "cross_zh_en",
        "query": "账单每个月几号出",
        "relevant": {"en/invoices.md": 2},
    },
    {
        "id": "en-zh",
        "kind": "cross_en_zh",
        "query": "how many machines does an on-premises installation need",
        "relevant": {"zh-CN/deploy.md": 2},
    },
]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bilingual")
    dataset = root / "tiny-bilingual"
    for relpath, text in PAGES.items():
        (dataset / "pages" / relpath).parent.mkdir(parents=True, exist_ok=True)
        (dataset / "pages" / relpath).write_text(text, encoding="utf-8")
    lines = [json.dumps(q, ensure_ascii=False) for q in QUERIES]
    (dataset / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = root / "out"
    run_bench_module("bench.eval.bilingual", out, "--dataset", str(dataset))
    record = json.loads((out / "bilingual.json").read_text())
    assert (out / "benchmarks.md").read_text().count("### Variant `default`") == 1
    return dict(record["variants"]["default"])


def test_every_configuration_has_every_metric_per_kind(result: dict[str, Any]) -> None:
    assert result["smoke"] is True and result["env"] == {}
    assert all(result[field] for field in ("command", "date", "git_revision", "machine"))
    assert result["index"]["documents"] == 6
    assert result["index"]["documents_by_locale"] == {"en": 3, "zh-CN": 3}
    assert result["queries"] == {kind: 1 for kind in KINDS}
    assert result["index"]["unknown_judgments"] == []
    assert result["not_measured"] == {}  # the packaged Reranker served: the defaults measured
    for name in ("lexical", "vector", "hybrid", "hybrid+rerank"):
        config = result["configs"][name]
        assert config["errors"] == []
        assert set(config["groups"]) == {*KINDS, "identifier kinds", "all"}
        for figures in config["groups"].values():
            assert set(METRICS) <= set(figures) and figures["queries"] >= 1
    assert result["configs"]["vector"]["groups"]["all"]["lexical_nonempty"] is None
    assert result["configs"]["lexical"]["groups"]["identifier"]["lexical_nonempty"] == 1.0
    assert len(result["targets"]) == 5


def test_each_cross_language_direction_has_its_own_top3_target(result: dict[str, Any]) -> None:
    hybrid = result["configs"]["hybrid"]["groups"]
    for kind in ("cross_zh_en", "cross_en_zh"):
        target = next(t for t in result["targets"] if t["what"].startswith(kind))
        assert target["threshold"] == 0.8 and target["direction"] == "at_least"
        assert target["measured"] == hybrid[kind]["top3"] and target["note"] == "1 queries"


def test_an_identifier_on_exactly_one_page_puts_that_page_first_lexically(
    result: dict[str, Any],
) -> None:
    answers = {q["id"]: q for q in result["configs"]["lexical"]["per_query"]}
    assert answers["ident"]["rank1_doc"] == "en/limits.md"
    assert answers["ident"]["hit@1"] is True
    assert result["configs"]["lexical"]["groups"]["identifier"]["exact@1"] == 1.0
