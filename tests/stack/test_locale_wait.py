"""An unrelated language waits, through the real stack (multilingual-e5-small,
mUSE as the cross-lingual second vector): on a site of English pages beside
Chinese pages about something else, an English question's answer lists
every English page before any Chinese one, where taking turns put a Chinese
page at rank 2 (services.retriever.locale_order, `wait_gap`). With waiting
off (RAG_LOCALE_WAIT_GAP=2) the same question gets the former turns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=20)]

CROSS_LINGUAL = {"cross_lingual_model": "packaged:muse-v3"}
PAGES = {
    "en/clean.md": "# Removing untracked files\n\nThe clean command deletes files that "
    "version control does not track from the working tree. Run it with --dry-run first to "
    "see what would be removed, then with --force to delete them.",
    "en/stash.md": "# Stashing changes\n\nStash saves your uncommitted changes and gives "
    "you a clean working tree; apply the stash later to bring the changes back.",
    "en/ignore.md": "# Ignoring files\n\nList patterns in an ignore file so that build "
    "output and editor backups never show up as untracked.",
    "en/rebase.md": "# Rebasing a branch\n\nRebase replays your commits on top of another "
    "branch, so the history reads as a straight line.",
    "zh/button.md": "# 按钮\n\n按钮用于触发一个操作。可以设置类型、尺寸和禁用状态，"
    "点击时会触发点击事件。",
    "zh/date-picker.md": "# 日期选择器\n\n日期选择器让用户从弹出的日历中选择年份、月份和日期。",
    "zh/toast.md": "# 轻提示\n\n轻提示在页面中间显示一条简短的消息，几秒后自动消失。",
}
QUESTION = "how do I delete files that version control does not track from my working copy"


def _stack(root: Path, embedder: Embedder, muse: Embedder, **retriever: object) -> BackgroundStack:
    stack = BackgroundStack(
        root,
        embedder,
        indexer=CROSS_LINGUAL,
        retriever={**CROSS_LINGUAL, **retriever},
        cross_lingual=muse,
    ).start()
    reply = stack.upsert(markdown_pages(PAGES))
    assert reply.counts.added == len(PAGES)
    return stack


@pytest.fixture(scope="module")
def stacks(
    tmp_path_factory: pytest.TempPathFactory, e5_embedder: Embedder, muse_embedder: Embedder
) -> Iterator[tuple[BackgroundStack, BackgroundStack]]:
    waiting = _stack(tmp_path_factory.mktemp("locale-wait"), e5_embedder, muse_embedder)
    turns = _stack(
        tmp_path_factory.mktemp("locale-turns"), e5_embedder, muse_embedder, locale_wait_gap=2.0
    )
    yield waiting, turns
    waiting.stop()
    turns.stop()


def _answer(stack: BackgroundStack) -> tuple[list[str], list[str]]:
    reply: rpb.RetrieveResponse = stack.retrieve(
        QUESTION, 60, top_k=7, debug=True, max_chunks_per_document=1, disable_rerank=True
    )
    assert not reply.degraded
    return [hit.doc_id for hit in reply.hits], list(reply.debug.notes)


def test_unrelated_chinese_pages_follow_every_english_page(
    stacks: tuple[BackgroundStack, BackgroundStack],
) -> None:
    ranked, notes = _answer(stacks[0])
    assert ranked[0] == "en/clean.md", (ranked, notes)
    assert [doc.split("/")[0] for doc in ranked] == ["en"] * 4 + ["zh"] * 3, (ranked, notes)
    assert any("zh after en's list, best cross-lingual cosine more than 0.2" in n for n in notes)


def test_with_waiting_off_a_chinese_page_takes_rank_2(
    stacks: tuple[BackgroundStack, BackgroundStack],
) -> None:
    ranked, notes = _answer(stacks[1])
    assert ranked[0] == "en/clean.md", (ranked, notes)
    assert ranked[1].startswith("zh/"), (ranked, notes)
    assert not any("after en's list" in n for n in notes)


def test_once_its_questions_keep_skipping_it_the_scope_no_longer_embeds_the_translation(
    stacks: tuple[BackgroundStack, BackgroundStack],
) -> None:
    """services.retriever.translation_deferral: the first questions embed the
    question and its Chinese translation in one pass; once most verdicts said
    the Chinese list waits, the translation is no longer embedded, and the
    answer is the same."""
    answers = [_answer(stacks[0]) for _ in range(7)]
    first, last = answers[0], answers[-1]
    assert "query texts embedded: 2 (the question, into zh)" in first[1], first[1]
    assert any("not embedded: into zh: its locales' lists wait" in n for n in last[1]), last[1]
    assert last[0] == first[0]
