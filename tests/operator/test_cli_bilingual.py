"""One `ingest` of a bilingual folder against a real Indexer: each page keeps
its own locale through dry run, ingest and sync; links need --follow-symlinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.operator.test_cli import cli, counts
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

PAGES = {
    "en/guide/setup.md": "# Setup\n\nInstall the service and open port 8443 for the API.\n",
    "zh-CN/guide/setup.md": "# 安装\n\n安装服务，并为接口开放 8443 端口。\n",
    "notes/chinese.md": "# 说明\n\n这个目录里的页面没有语言文件夹，按文字判断语言。\n",
}


def test_bilingual_folder_in_one_ingest(stack: BackgroundStack, tmp_path: Path) -> None:
    site = tmp_path / "site"
    for relpath, text in PAGES.items():
        (site / relpath).parent.mkdir(parents=True, exist_ok=True)
        (site / relpath).write_text(text, encoding="utf-8")
    (site / "start.md").symlink_to(Path("en", "guide", "setup.md"))

    plan = cli(stack, "ingest", str(site), "--scope", "site", "--dry-run")
    assert plan.returncode == 0 and counts(plan.stdout)["added"] == 3  # a skip is no failure
    assert "start.md: symbolic link, skipped: pass --follow-symlinks" in plan.stderr

    done = cli(stack, "ingest", str(site), "--scope", "site", "--follow-symlinks")
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout)["added"] == 4
    stats = json.loads(cli(stack, "stats").stdout)
    assert set(stats["chunks_by_locale"]) == {"en", "zh-CN", "zh"}

    # The keep list carries each page's own locale: only the deleted page goes,
    # and its English partner loses its translation key (a metadata-only update).
    (site / "zh-CN" / "guide" / "setup.md").unlink()
    synced = cli(stack, "ingest", str(site), "--scope", "site", "--follow-symlinks", "--sync")
    assert synced.returncode == 0, synced.stderr
    plan_counts = counts(synced.stdout)
    states = (plan_counts["removed"], plan_counts["metadata_only"], plan_counts["unchanged"])
    assert states == (1, 1, 2)


def test_a_legacy_chinese_page_is_read_with_the_fallback_encoding(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    site = tmp_path / "legacy"
    site.mkdir()
    page = "# 限流\n\n每个密钥每分钟最多 600 次请求，超出时返回 429，请稍后重试。\n"
    (site / "rate-limits.md").write_bytes(page.encode("gb18030"))
    (site / "intro.md").write_text("# 简介\n\n这是一个知识库。\n", encoding="utf-8")

    refused = cli(stack, "ingest", str(site), "--scope", "legacy")
    assert refused.returncode == 1 and counts(refused.stdout)["added"] == 1
    assert "--fallback-encoding" in refused.stderr  # the hint names the way out

    done = cli(stack, "ingest", str(site), "--scope", "legacy", "--fallback-encoding", "gb18030")
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout)["added"] == 1
    hits = stack.retrieve(
        "每分钟最多能发多少次请求", top_k=2, disable_rerank=True,
        filter=rpb.ScopeFilter(scope_id="legacy"),
    ).hits  # fmt: skip
    assert hits[0].doc_id == "rate-limits.md" and "600" in hits[0].text


def test_a_site_in_many_languages_whose_links_are_cut_is_served(
    e5_embedder: Embedder, tmp_path: Path
) -> None:
    """Five languages and a long base URL: each page's `translations` holds
    only some of its versions (the loader bounds it), so the links are one-
    sided. Found by a probe: every Retrieve of such a scope failed with
    INTERNAL (a KeyError in the step that gives a page and its translations
    one place)."""
    site = tmp_path / "many"
    for locale in ("en", "de", "fr", "ja", "zh-CN"):
        (site / locale).mkdir(parents=True)
        (site / locale / "a.md").write_text(
            f"# Capybara ({locale})\n\nThe capybara guide explains capybara-init.\n"
        )
        (site / locale / "b.md").write_text(f"# Walrus ({locale})\n\nThe walrus page.\n")
    base_url = "https://docs.example.com/" + "x" * 300 + "/"
    # The multilingual model: with it the locales are ranked apart and the step runs.
    stack = BackgroundStack(tmp_path / "data", e5_embedder).start()
    try:
        done = cli(stack, "ingest", str(site), "--scope", "many", "--base-url", base_url)
        assert done.returncode == 0, done.stderr
        assert "translations left out" in done.stderr  # the lists were cut
        hits = stack.retrieve(
            "capybara guide", top_k=4, disable_rerank=True, filter=rpb.ScopeFilter(scope_id="many")
        ).hits
    finally:
        stack.stop()
    assert [h.doc_id for h in hits[:2]] == ["en/a.md", "en/b.md"]
