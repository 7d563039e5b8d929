"""The third-party documentation question set: developer questions judged
against pages of the corpus suite (scripts/fetch_doc_corpus.py stages them).

Layout: bench/datasets/third_party/queries.jsonl, one object per line:

    {"id", "source", "split", "query", "relevant": {doc_id: grade},
     "answer", "section"?}

`doc_id` is the page's path under the corpus's pages/ folder, as the folder
loader names it (`python3-doc/library/collections.html`). `answer` is what
the page calls the thing asked for (never a word of the question; it is
documentation, not scored). The pages are not in the repository: they are
the packages' own documentation, staged in a cache outside the clone.

The index holds one rendering per page (`one_rendering`): the Python
reference's reST sources beside its HTML, git's AsciiDoc beside its HTML and
npm's generated HTML beside its Markdown are left out, so two copies of one
page never compete for the same question. Beside the judged pages, a
deterministic sample of the rest (`distractors`) makes the haystack.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.eval.dataset import Qrels

SPLITS = ("train", "test")
_SUFFIXES = (".md", ".markdown", ".html", ".htm", ".txt")
# Renderings of a page that also exists in the kept form (see the docstring).
_OTHER_RENDERINGS = ("python3-doc/_sources/", "npm-docs/docs/output/")


@dataclass(frozen=True)
class DocQuery:
    id: str
    source: str
    split: str
    text: str
    relevant: dict[str, int]
    answer: str = ""
    section: str = ""


def read_queries(path: Path) -> list[DocQuery]:
    """Every query, read strictly: a typo stops the run instead of becoming a miss."""
    queries, seen = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            query = parse_query(json.loads(line), f"{path.name}:{number}")
            if query.id in seen:
                raise ValueError(f"{path}: query id {query.id!r} appears twice")
            seen.add(query.id)
            queries.append(query)
    return queries


def parse_query(record: dict[str, Any], where: str) -> DocQuery:
    missing = [k for k in ("id", "source", "split", "query", "relevant") if k not in record]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    if record["split"] not in SPLITS:
        raise ValueError(f"{where}: split {record['split']!r} is not one of {', '.join(SPLITS)}")
    relevant = {str(doc): int(grade) for doc, grade in dict(record["relevant"]).items()}
    if not any(grade > 0 for grade in relevant.values()):
        raise ValueError(f"{where}: no page judged relevant")
    return DocQuery(
        id=str(record["id"]),
        source=str(record["source"]),
        split=record["split"],
        text=str(record["query"]),
        relevant=relevant,
        answer=str(record.get("answer") or ""),
        section=str(record.get("section") or ""),
    )


def qrels(queries: Iterable[DocQuery]) -> Qrels:
    return {q.id: dict(q.relevant) for q in queries}


def one_rendering(relpaths: Iterable[str]) -> list[str]:
    """The pages to index, one rendering each, sorted (see the module docstring)."""
    paths = {p for p in relpaths if p.endswith(_SUFFIXES)}
    kept = [
        p
        for p in paths
        if not p.startswith(_OTHER_RENDERINGS)
        and not (p.startswith("git-doc/") and p.endswith(".txt") and p[:-4] + ".html" in paths)
    ]
    return sorted(kept)


def other_renderings(relpaths: Iterable[str], pages: Iterable[str]) -> list[str]:
    """The files of `relpaths` that render one of `pages` otherwise: the
    Python reference's reST sources, git's AsciiDoc, npm's generated HTML
    (as a documentation package ships them, and a folder ingest meets them)."""
    wanted = set(pages)
    return sorted(p for p in relpaths if p not in wanted and rendered_page(p) in wanted)


def rendered_page(relpath: str) -> str:
    """The page a file is a rendering of (itself when it is no known other rendering)."""
    python_sources, npm_output = _OTHER_RENDERINGS
    if relpath.startswith(python_sources) and relpath.endswith(".rst.txt"):
        return "python3-doc/" + relpath.removeprefix(python_sources)[: -len(".rst.txt")] + ".html"
    if relpath.startswith(npm_output) and relpath.endswith(".html"):
        return "npm-docs/docs/content/" + relpath.removeprefix(npm_output)[: -len(".html")] + ".md"
    if relpath.startswith("git-doc/") and relpath.endswith(".txt"):
        return relpath[: -len(".txt")] + ".html"
    return relpath


def text_source(pages_root: Path, doc_id: str) -> str | None:
    """The page's plain-text source beside its HTML, if the corpus has one:
    the Python reference's reST (`_sources/<page>.rst.txt`), git's AsciiDoc
    (`<page>.txt`)."""
    if doc_id.startswith("python3-doc/") and doc_id.endswith(".html"):
        source = "python3-doc/_sources/" + doc_id.removeprefix("python3-doc/")[:-5] + ".rst.txt"
    elif doc_id.startswith("git-doc/") and doc_id.endswith(".html"):
        source = doc_id[:-5] + ".txt"
    else:
        return None
    return source if (pages_root / source).is_file() else None


def distractors(
    pages_root: Path, candidates: Sequence[str], judged: set[str], count: int, max_bytes: int
) -> list[str]:
    """`count` pages that are not judged, at most `max_bytes` each, taken in
    turns from each source (the first path component), each source's pages
    in the order of their path's sha256: the same pages on every machine,
    every source represented."""
    by_source: dict[str, list[str]] = {}
    for path in sorted(candidates, key=lambda p: hashlib.sha256(p.encode()).hexdigest()):
        if path not in judged and (pages_root / path).stat().st_size <= max_bytes:
            by_source.setdefault(path.split("/", 1)[0], []).append(path)
    turns = itertools.zip_longest(*(by_source[name] for name in sorted(by_source)))
    picked = (path for turn in turns for path in turn if path is not None)
    return list(itertools.islice(picked, count))


def staged_subset(pages_root: Path, relpaths: Sequence[str], target: Path) -> Path:
    """Copy the chosen pages into `target`, their paths kept (so the loader
    gives them the same doc ids); `target` is emptied first."""
    shutil.rmtree(target, ignore_errors=True)
    for relpath in relpaths:
        destination = target / relpath
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pages_root / relpath, destination)
    return target


def corpus_listing(pages_root: Path) -> list[str]:
    """Every visible file under the staged corpus, as a path relative to it."""
    relpaths = (path.relative_to(pages_root) for path in pages_root.rglob("*") if path.is_file())
    return [str(p) for p in relpaths if not any(part.startswith(".") for part in p.parts)]
