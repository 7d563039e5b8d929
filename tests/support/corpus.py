"""The small Markdown corpus under tests/fixtures/corpus, as Indexer documents."""

from __future__ import annotations

from pathlib import Path

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb

CORPUS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
BASE_URL = "https://docs.example/"


def corpus_documents(scope_id: str = "handbook") -> list[ipb.Document]:
    docs = []
    for path in sorted(CORPUS_DIR.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = text.splitlines()[0].lstrip("# ").strip()
        docs.append(
            ipb.Document(
                doc_id=path.name,
                url=BASE_URL + path.stem,
                title=title,
                locale="en",
                scope_id=scope_id,
                text=text,
                content_type=ipb.CONTENT_TYPE_MARKDOWN,
                metadata={
                    "section": "ops"
                    if path.stem in {"deployment", "backups", "supervisor"}
                    else "general"
                },
            )
        )
    return docs


def url_of(filename: str) -> str:
    return BASE_URL + Path(filename).stem
