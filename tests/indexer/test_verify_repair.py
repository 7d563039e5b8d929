"""`verify` and `verify --repair` on the real embedded stores and the real model.

A small index is built by the real IndexingPipeline, then damaged BY HAND
through the store objects themselves (one kind of damage per test, in each
store where it applies). The audit must name exactly what was done, the
repair must undo it, and a second audit must find nothing. One case runs
through the real Indexer server: the Verify RPC and the operator CLI.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.models import Chunk, ChunkPayload, Document, ScopeFilter, StoredChunk
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.audit import LEXICAL, VECTORS, AuditReport, Finding
from services.indexer.identity import chunk_hash, chunk_id, metadata_hash
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import DocState
from services.indexer.settings import IndexerSettings
from services.indexer.verify import IndexVerifier
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.manifest import Manifest
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage, chunk_from_stored, embedding_text
from services.storage.visibility import committed_generation
from tests.support.release_check import run_cli
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

STORES = [VECTORS, LEXICAL]
# Small chunks, so every document has several and one can be damaged alone.
SETTINGS = IndexerSettings(chunk_target_chars=200, chunk_overlap_chars=0, chunk_max_slack_chars=100)


def body(title: str, words: list[str]) -> str:
    """One section per invented word: each chunk holds a word no other holds."""
    sections = [
        f"## Section {w}\n\nThis section explains the {w} procedure in some detail, with "
        f"enough words to fill a chunk of its own. Operators configure {w} before the first run."
        for w in words
    ]
    return f"# {title}\n\n" + "\n\n".join(sections)


DOCS = [
    Document(
        "alpha",
        body("Alpha", ["zephyrquill", "brambleoxide", "lanternmoss"]),
        url="https://x.test/alpha",
        title="Alpha guide",
        scope_id="site",
        locale="en",
        metadata={"team": "search"},
    ),
    Document(
        "beta",
        body("Beta", ["copperwren", "saltmarigold"]),
        url="https://x.test/beta",
        title="Beta Anleitung",
        scope_id="site",
        locale="de",
    ),
    Document(
        "gamma",
        body("Gamma", ["velvetgeyser", "orchidpylon"]),
        url="https://x.test/gamma",
        title="Gamma notes",
        scope_id="blog",
        locale="en",
    ),
]
# The chunk every single-chunk case damages: alpha's, holding this word.
TARGET_WORD = "brambleoxide"


@dataclass
class Index:
    embedder: Embedder
    vectors: VectorStore
    lexical: LexicalStore
    manifest: Manifest
    pipeline: IndexingPipeline
    verifier: IndexVerifier

    def store(self, name: str) -> VectorStore | LexicalStore:
        return self.vectors if name == VECTORS else self.lexical

    def other(self, name: str) -> VectorStore | LexicalStore:
        return self.lexical if name == VECTORS else self.vectors

    def write(self, name: str, chunk: Chunk) -> None:
        """Write one row into one store, as the pipeline would (real vector)."""
        if name == VECTORS:
            vector = self.embedder.embed_documents([embedding_text(chunk)])
            self.vectors.upsert([chunk], vector.tolist(), deadline=unrequested_deadline())
        else:
            self.lexical.upsert([chunk], deadline=unrequested_deadline())

    def target(self) -> StoredChunk:
        """Alpha's chunk holding TARGET_WORD, as both stores hold it now."""
        ids = self.manifest.get("alpha", "en", deadline=unrequested_deadline()).chunk_ids  # type: ignore[union-attr]
        rows = [
            r
            for r in self.lexical.get(ids, deadline=unrequested_deadline())
            if TARGET_WORD in r.text
        ]
        assert len(rows) == 1
        assert self.vectors.get([rows[0].chunk_id], deadline=unrequested_deadline()) == rows
        return rows[0]

    def visible(self) -> ScopeFilter:
        return ScopeFilter(
            visible_generation=committed_generation(self.manifest, unrequested_deadline())
        )


@pytest.fixture
def index(tmp_path: Path, embedder: Embedder) -> Iterator[Index]:
    stores = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, embedder.dim)
    manifest = open_manifest(stores)
    pipeline = build_indexing_pipeline(SETTINGS, embedder, Storage(vectors, lexical, manifest))
    report = pipeline.upsert(DOCS)
    assert [p.state for p in report.plans] == [DocState.ADDED] * len(DOCS)
    verifier = IndexVerifier(embedder, Storage(vectors, lexical, manifest), pipeline.recover)
    index = Index(embedder, vectors, lexical, manifest, pipeline, verifier)
    assert_clean(index)
    yield index
    vectors.close()
    lexical.close()
    manifest.close()


def manifest_counts(manifest: Manifest) -> list[tuple[str, str, int, int, int]]:
    """(scope, locale, n, n, n) per scope and locale, from the manifest alone."""
    tally: Counter[tuple[str, str]] = Counter()
    for entry in manifest.entries():
        tally[(entry.scope_id, entry.locale)] += len(entry.chunk_ids)
    return [(s, loc, n, n, n) for (s, loc), n in sorted(tally.items())]


def assert_clean(index: Index) -> AuditReport:
    report = index.verifier.verify()
    assert report.findings == [] and report.clean
    assert report.documents == index.manifest.count(deadline=unrequested_deadline()) == len(DOCS)
    counts = [
        (c.scope_id, c.locale, c.manifest_chunks, c.vectors, c.lexical_rows) for c in report.counts
    ]
    assert counts == manifest_counts(index.manifest)
    return report


def audit_then_repair(index: Index, expected: list[Finding]) -> AuditReport:
    """The audit names exactly `expected`; the repair fixes all of it; a
    second audit (and a second repair) finds nothing."""
    report = index.verifier.verify()
    assert report.findings == expected
    assert not report.clean and not report.repair and report.repaired == 0
    repaired = index.verifier.verify(repair=True)
    assert repaired.findings == [replace(f, repair="repaired") for f in expected]
    assert repaired.repair and repaired.clean
    assert (repaired.repaired, repaired.unrepairable) == (len(expected), 0)
    assert_clean(index)
    again = index.verifier.verify(repair=True)  # idempotent: nothing left to do
    assert again.findings == [] and again.clean
    return repaired


def stray_chunk(generation: int) -> Chunk:
    text = "A stray row about the quillfeather gasket, which no document ever contained."
    return Chunk(
        chunk_id=chunk_id("en", "stray", 0),
        doc_id="stray",
        position=0,
        text=text,
        content_hash=chunk_hash("", text),
        url="https://x.test/stray",
        title="Stray",
        scope_id="site",
        locale="en",
        generation=generation,
    )


@pytest.mark.parametrize("store", STORES)
def test_an_orphan_row_is_reported_and_deleted(index: Index, store: str) -> None:
    orphan = stray_chunk(generation=committed_generation(index.manifest, unrequested_deadline()))
    index.write(store, orphan)
    audit_then_repair(index, [Finding("orphan", store, orphan.chunk_id, "stray", "en")])
    assert index.store(store).get([orphan.chunk_id], deadline=unrequested_deadline()) == []


@pytest.mark.parametrize("store", STORES)
def test_a_row_of_an_uncommitted_generation_is_reported_and_deleted(
    index: Index, store: str
) -> None:
    row = stray_chunk(generation=committed_generation(index.manifest, unrequested_deadline()) + 1)
    index.write(store, row)
    audit_then_repair(index, [Finding("uncommitted", store, row.chunk_id, "stray", "en")])
    assert index.store(store).get([row.chunk_id], deadline=unrequested_deadline()) == []


def assert_found_by_its_own_content(index: Index, store: str, row: StoredChunk) -> None:
    """The restored row is searchable again in that store: the nearest
    neighbour of its own embedding, or the best BM25 hit for its word."""
    if store == VECTORS:
        vector = index.embedder.embed_documents([embedding_text(row)])[0].tolist()
        hits = index.vectors.search(vector, 3, index.visible(), deadline=unrequested_deadline())
        assert hits[0].chunk.chunk_id == row.chunk_id
        assert hits[0].score > 0.99
    else:
        hits = index.lexical.search(
            TARGET_WORD, 3, index.visible(), deadline=unrequested_deadline()
        )
        assert hits[0].chunk.chunk_id == row.chunk_id


@pytest.mark.parametrize("store", STORES)
def test_a_missing_row_is_rewritten_from_the_other_store(index: Index, store: str) -> None:
    row = index.target()
    index.store(store).delete([row.chunk_id], deadline=unrequested_deadline())
    assert index.store(store).get([row.chunk_id], deadline=unrequested_deadline()) == []
    audit_then_repair(index, [Finding("missing", store, row.chunk_id, "alpha", "en")])
    assert index.store(store).get([row.chunk_id], deadline=unrequested_deadline()) == [row]
    assert_found_by_its_own_content(index, store, row)


@pytest.mark.parametrize("store", STORES)
def test_payload_drift_is_restored_to_the_manifests_version(index: Index, store: str) -> None:
    row = index.target()
    drifted = ChunkPayload(
        url="https://elsewhere.test/moved",
        title="A drifted title",
        heading_path=row.heading_path,
        scope_id=row.scope_id,
        locale=row.locale,
        metadata=dict(row.metadata),
        generation=row.generation,
    )
    index.store(store).update_payload([(row.chunk_id, drifted)], deadline=unrequested_deadline())
    assert (
        index.store(store).get([row.chunk_id], deadline=unrequested_deadline())[0].title
        == "A drifted title"
    )
    entry = index.manifest.get("alpha", "en", deadline=unrequested_deadline())
    assert entry is not None
    actual = metadata_hash(
        Document(
            "alpha",
            "",
            url=drifted.url,
            title=drifted.title,
            scope_id=drifted.scope_id,
            locale=drifted.locale,
            metadata=drifted.metadata,
        )
    )
    expected = Finding(
        "mismatch", store, row.chunk_id, "alpha", "en", "metadata", entry.metadata_hash, actual
    )
    audit_then_repair(index, [expected])
    restored = index.store(store).get([row.chunk_id], deadline=unrequested_deadline())
    assert restored == [row]
    assert (restored[0].title, restored[0].url) == ("Alpha guide", "https://x.test/alpha")
    if store == LEXICAL:  # the title's terms are re-indexed too
        scope = replace(index.visible(), doc_ids=("alpha",))
        assert index.lexical.search("drifted", 5, scope, deadline=unrequested_deadline()) == []
        assert index.lexical.search("guide", 5, scope, deadline=unrequested_deadline())


@pytest.mark.parametrize("store", STORES)
def test_text_drift_is_rewritten_from_the_other_store(index: Index, store: str) -> None:
    row = index.target()
    new_text = "Entirely different words: the tundrafalcon valve replaces everything said here."
    drifted = replace(
        chunk_from_stored(row),
        text=new_text,
        content_hash=chunk_hash(row.heading_path, new_text),
    )
    index.write(store, drifted)
    assert (
        index.store(store).get([row.chunk_id], deadline=unrequested_deadline())[0].text == new_text
    )
    expected = Finding(
        "mismatch",
        store,
        row.chunk_id,
        "alpha",
        "en",
        "content_hash",
        row.content_hash,
        drifted.content_hash,
    )
    audit_then_repair(index, [expected])
    assert index.store(store).get([row.chunk_id], deadline=unrequested_deadline()) == [row]
    assert_found_by_its_own_content(index, store, row)
    if store == LEXICAL:
        assert (
            index.lexical.search(
                "tundrafalcon", 5, index.visible(), deadline=unrequested_deadline()
            )
            == []
        )


def test_a_chunk_missing_from_both_stores_is_unrepairable(index: Index) -> None:
    row = index.target()
    index.vectors.delete([row.chunk_id], deadline=unrequested_deadline())
    index.lexical.delete([row.chunk_id], deadline=unrequested_deadline())
    expected = [Finding("missing", s, row.chunk_id, "alpha", "en") for s in STORES]
    assert index.verifier.verify().findings == expected
    for _ in range(2):  # repairing again changes nothing and says the same
        report = index.verifier.verify(repair=True)
        assert [replace(f, repair="") for f in report.findings] == expected
        for finding in report.findings:
            assert finding.repair.startswith("unrepairable:")
            assert finding.repair.endswith("re-ingest document 'alpha'")
        assert not report.clean
        assert (report.repaired, report.unrepairable) == (0, 2)
    # What does rebuild it: the document removed, then ingested again.
    index.pipeline.delete(["alpha"], "en")
    index.pipeline.upsert([DOCS[0]])
    assert_clean(index)
    rebuilt = replace(row, generation=committed_generation(index.manifest, unrequested_deadline()))
    assert (
        index.vectors.get([row.chunk_id], deadline=unrequested_deadline())
        == index.lexical.get([row.chunk_id], deadline=unrequested_deadline())
        == [rebuilt]
    )


def test_re_ingesting_the_named_document_rebuilds_an_unrepairable_chunk(index: Index) -> None:
    row = index.target()
    index.vectors.delete([row.chunk_id], deadline=unrequested_deadline())
    index.lexical.delete([row.chunk_id], deadline=unrequested_deadline())
    report = index.verifier.verify(repair=True)
    assert all(f.repair.endswith("re-ingest document 'alpha'") for f in report.findings)
    index.pipeline.upsert([DOCS[0]])  # what the finding says to do
    assert index.verifier.verify().clean


# --- through the real Indexer server: the Verify RPC and the CLI ---------------------


@pytest.fixture
def stack(tmp_path: Path, embedder: Embedder) -> Iterator[BackgroundStack]:
    chunking = ("chunk_target_chars", "chunk_overlap_chars", "chunk_max_slack_chars")
    indexer = {name: getattr(SETTINGS, name) for name in chunking}
    stack = BackgroundStack(tmp_path / "data", embedder, indexer=indexer).start()
    docs = [
        ipb.Document(
            doc_id=d.doc_id,
            text=d.text,
            url=d.url,
            title=d.title,
            scope_id=d.scope_id,
            locale=d.locale,
            metadata=d.metadata,
        )
        for d in DOCS
    ]
    assert stack.upsert(docs).counts.added == len(DOCS)
    yield stack
    stack.stop()


def cli(stack: BackgroundStack, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(stack.indexer_addr, *args)


def verify_rpc(stack: BackgroundStack, repair: bool = False) -> tuple[list[str], ipb.VerifyReport]:
    """The phases streamed, then the report."""
    phases: list[str] = []
    for message in stack.indexer.Verify(ipb.VerifyRequest(repair=repair), timeout=120):
        if message.HasField("report"):
            return phases, message.report
        phases.append(message.phase)
    raise AssertionError("Verify ended without a report")


def findings_of(report: dict) -> list[tuple[str, str, str, str, str]]:  # type: ignore[type-arg]
    return [
        (f["kind"], f["store"], f["chunk_id"], f.get("field", ""), f.get("repair", ""))
        for f in report.get("findings", [])
    ]


def test_verify_rpc_and_cli_report_repair_and_exit_codes(stack: BackgroundStack) -> None:
    assert stack.runtime is not None
    vectors, lexical, manifest = (
        stack.runtime.storage.vectors,
        stack.runtime.storage.lexical,
        stack.runtime.storage.manifest,
    )
    clean = cli(stack, "verify")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "index clean" in clean.stdout

    # Damage: an orphan in the lexical store, a retitled row in the vector store.
    ids = manifest.get("gamma", "en", deadline=unrequested_deadline()).chunk_ids  # type: ignore[union-attr]
    target = vectors.get([ids[1]], deadline=unrequested_deadline())[0]
    orphan = stray_chunk(generation=committed_generation(manifest, unrequested_deadline()))
    lexical.upsert([orphan], deadline=unrequested_deadline())
    retitled = ChunkPayload(
        url=target.url,
        title="Retitled by hand",
        heading_path=target.heading_path,
        scope_id=target.scope_id,
        locale=target.locale,
        metadata=dict(target.metadata),
        generation=target.generation,
    )
    vectors.update_payload([(target.chunk_id, retitled)], deadline=unrequested_deadline())
    expected = [
        ("orphan", LEXICAL, orphan.chunk_id, "", ""),
        ("mismatch", VECTORS, target.chunk_id, "metadata", ""),
    ]

    phases, report = verify_rpc(stack)
    assert not report.clean and report.findings_total == 2
    assert {"manifest", "vectors", "lexical", "compare"} <= set(phases)
    rpc_findings = [(f.kind, f.store, f.chunk_id, f.field, f.repair) for f in report.findings]
    assert sorted(rpc_findings) == sorted(expected)

    audit = cli(stack, "verify", "--json")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    as_json = json.loads(audit.stdout)
    assert not as_json.get("clean", False)
    assert sorted(findings_of(as_json)) == sorted(expected)

    repair = cli(stack, "verify", "--repair", "--json")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    repaired = json.loads(repair.stdout)
    assert repaired["clean"] and repaired["repair"] and int(repaired["repaired"]) == 2
    assert sorted(findings_of(repaired)) == sorted(
        (k, s, c, f, "repaired") for k, s, c, f, _ in expected
    )
    assert lexical.get([orphan.chunk_id], deadline=unrequested_deadline()) == []
    assert vectors.get([target.chunk_id], deadline=unrequested_deadline())[0].title == "Gamma notes"

    again = cli(stack, "verify")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "index clean" in again.stdout
    _, final = verify_rpc(stack)
    assert final.clean and final.findings_total == 0
    counts = [
        (c.scope_id, c.locale, c.manifest_chunks, c.vectors, c.lexical_rows) for c in final.counts
    ]
    assert counts == manifest_counts(manifest)
    # The deleted orphan is not served.
    hits = stack.retrieve(
        "quillfeather gasket", channels=[rpb.CHANNEL_LEXICAL], disable_rerank=True
    ).hits
    assert "stray" not in [h.doc_id for h in hits]

    # A chunk neither store holds: --repair cannot fix it, the CLI exits 1.
    lost = manifest.get("beta", "de", deadline=unrequested_deadline()).chunk_ids[0]  # type: ignore[union-attr]
    vectors.delete([lost], deadline=unrequested_deadline())
    lexical.delete([lost], deadline=unrequested_deadline())
    unrepairable = cli(stack, "verify", "--repair")
    assert unrepairable.returncode == 1, unrepairable.stdout + unrepairable.stderr
    assert "index NOT clean" in unrepairable.stdout
    assert "re-ingest document 'beta'" in unrepairable.stdout
    assert "repaired 0, unrepairable 2" in unrepairable.stdout


def test_verify_quiet_on_a_clean_index_exits_0(stack: BackgroundStack) -> None:
    quiet = cli(stack, "verify", "--quiet")
    assert "Traceback" not in quiet.stderr, quiet.stderr
    assert quiet.returncode == 0 and "index clean" in quiet.stdout
