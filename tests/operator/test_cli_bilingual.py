"""One `ingest` of a bilingual folder against a real Indexer: each page keeps
its own locale through dry run, ingest and sync; links need --follow-symlinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
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
