"""`ingest` of a folder laid out as Debian installs documentation: pages
gzip-compressed beside plain ones, a changelog that is no page, and a
corrupt file. Against a real Indexer and Retriever: the compressed pages are
indexed and found first for their questions; the corrupt file alone is
rejected."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.operator.test_cli import cli, counts
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

PAGES = {
    "redis-server/README.md": (
        "# Redis on Debian\n\nThe server reads /etc/redis/redis.conf; set `maxmemory 2gb` "
        "there to cap the memory it uses for keys.\n"
    ),
    "base-passwd/users-and-groups.txt": (
        "Users and groups\n================\n\nThe uid of the nobody account is 65534; "
        "daemons that own no files run as nobody.\n"
    ),
    "man-db/README.md": "# man-db\n\nmandb rebuilds the index caches of the manual pages.\n",
}


def test_compressed_pages_are_indexed_and_found(stack: BackgroundStack, tmp_path: Path) -> None:
    docs = tmp_path / "doc"
    for relpath, text in PAGES.items():
        compressed = relpath != "man-db/README.md"  # one page plain, as packages mix them
        path = docs / (f"{relpath}.gz" if compressed else relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    changelog = b"redis (5:7.0.15-1) bookworm; urgency=medium\n\n  * Fix the replica handshake.\n"
    (docs / "redis-server" / "changelog.Debian.gz").write_bytes(gzip.compress(changelog))
    (docs / "redis-server" / "redis.conf.png").write_bytes(b"\x89PNG")
    (docs / "man-db" / "NEWS.md.gz").write_bytes(gzip.compress(b"# News\n" * 500)[:40])

    done = cli(stack, "ingest", str(docs), "--scope", "debian-doc")
    assert done.returncode == 1  # one file could not be read: reported, the rest indexed
    assert counts(done.stdout)["added"] == 4  # Debian's changelog, named by convention, too
    assert "rejected man-db/NEWS.md.gz: cannot read: not readable as gzip" in done.stderr
    # An image names no page type: not read, and the report says so.
    assert "skipped .: 1 file(s) not read" in done.stderr
    assert '"Loading a folder"): redis-server/redis.conf.png' in done.stderr
    for question, page in (
        ("how do I cap the memory redis uses", "redis-server/README.md.gz"),
        ("which uid does the nobody account have", "base-passwd/users-and-groups.txt.gz"),
        ("which Debian upload fixed the replica handshake", "redis-server/changelog.Debian.gz"),
    ):
        hits = stack.retrieve(question, top_k=3, disable_rerank=True).hits
        assert hits[0].doc_id == page
    redis = stack.retrieve("maxmemory 2gb", top_k=1, disable_rerank=True).hits[0]
    assert redis.title == "Redis on Debian" and "maxmemory 2gb" in redis.text


def test_a_compressed_beir_corpus_is_ingested(stack: BackgroundStack, tmp_path: Path) -> None:
    records = [
        {"_id": "4983", "title": "Microstructural development", "text": "Myelination of axons."},
        {"_id": "5836", "title": "Induction of myelodysplasia", "text": "Blood cell lineages."},
    ]
    corpus = tmp_path / "corpus.jsonl.gz"
    corpus.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    done = cli(stack, "ingest", str(corpus), "--scope", "beir-gz")  # the format read from it
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout)["added"] == 2
    hits = stack.retrieve("myelination of axons", top_k=1, disable_rerank=True).hits
    assert hits[0].doc_id == "4983"
