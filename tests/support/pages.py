"""Markdown pages as Indexer documents, for tests that index a few pages of
their own into a real stack: the doc id is the page's path, its locale the
path's first folder (`en/…`, `zh-CN/…`; none for a top-level page)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb

TitleFn = Callable[[str, str], str]


def first_heading(path: str, text: str) -> str:
    """The page's first line without its `#` marks."""
    return text.splitlines()[0].lstrip("# ")


def markdown_pages(
    pages: Mapping[str, str],
    scope_id: str = "site",
    base_url: str = "https://docs.example.com/",
    title: TitleFn = first_heading,
) -> list[ipb.Document]:
    return [
        ipb.Document(
            doc_id=path,
            url=base_url + path,
            title=title(path, text),
            scope_id=scope_id,
            locale=path.split("/")[0] if "/" in path else "",
            text=text,
            content_type=ipb.CONTENT_TYPE_MARKDOWN,
        )
        for path, text in pages.items()
    ]
