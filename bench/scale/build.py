"""Write a synthetic corpus into an embedded index the way the Indexer does.

Each run of `docs_per_run` documents follows the Indexer's write protocol for
added documents (services.indexer.pipeline / transactions): intents first,
then the vector rows, the lexical rows, and the manifest commit that makes
the run's generation visible; after the last run the vector store's
optimizer builds the HNSW index, as the Indexer does after every run. Only
the embedding is skipped (vectors are synthesised): store writes are timed
part by part.
"""

from __future__ import annotations

import contextlib
import hashlib
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from pathlib import Path

import numpy as np

from bench.common.memory_cap import MemoryCap
from bench.common.memory_peaks import MemoryPeaks
from bench.scale.corpus import SyntheticCorpus, SyntheticDocument
from bench.scale.load_probe import LoadProbe
from services.storage.base import unrequested_deadline
from services.storage.factory import MANIFEST_FILE, Storage, open_storage
from services.storage.manifest import ManifestEntry, RunIntent
from services.storage.settings import StoreMode, StoreSettings

# The operator CLI sends documents in batches of this order; each is one run.
DOCS_PER_RUN = 500


@dataclass
class BuildReport:
    documents: int = 0
    chunks: int = 0
    generation: int = 0  # the last committed run's
    seconds: dict[str, float] = field(default_factory=dict)
    scopes: Counter[str] = field(default_factory=Counter)
    locales: Counter[str] = field(default_factory=Counter)
    # The writing process's peak RSS once each phase is done (it only grows),
    # so the phase that raised it is the first whose figure jumps.
    peak_rss_mib: dict[str, int] = field(default_factory=dict)
    # Each phase's own peaks of the two parts of that total (sampled): the
    # process's heap (anon) and the store files it maps (file pages).
    peak_parts_mib: dict[str, dict[str, int]] = field(default_factory=dict)
    # What the memory cgroup saw when the build ran under a hard limit.
    memory_cap: dict[str, int] | None = None
    # With the HNSW build in a child process (the Indexer's default): that
    # child's peak RSS, when it is the largest of this process's children.
    optimizer_child_peak_rss_mib: int | None = None
    optimizations: int = 0  # optimizer calls that changed the shard

    def mark_peak(self, phase: str, parts: MemoryPeaks | None = None) -> None:
        self.peak_rss_mib[phase] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        if parts is not None:
            self.peak_parts_mib[phase] = parts.take()

    def add_time(self, part: str, seconds: float) -> None:
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds


def document_runs(corpus: SyntheticCorpus, size: int) -> Iterator[list[SyntheticDocument]]:
    documents = corpus.documents()
    while batch := list(islice(documents, size)):
        yield batch


def _entry(document: SyntheticDocument) -> ManifestEntry:
    body = hashlib.sha256("".join(c.content_hash for c in document.chunks).encode())
    return ManifestEntry(
        doc_id=document.doc_id,
        locale=document.locale,
        scope_id=document.scope_id,
        content_hash=body.hexdigest()[:32],
        metadata_hash=hashlib.sha256(document.scope_id.encode()).hexdigest()[:32],
        chunk_ids=tuple(c.chunk_id for c in document.chunks),
        chunk_hashes=tuple(c.content_hash for c in document.chunks),
    )


def _write_run(
    storage: Storage, generation: int, documents: list[SyntheticDocument], report: BuildReport
) -> None:
    chunks = [
        replace(chunk, generation=generation) for document in documents for chunk in document.chunks
    ]
    vectors = np.concatenate([document.vectors for document in documents])
    intents = [
        RunIntent(generation, d.doc_id, d.locale, None, tuple(c.chunk_id for c in d.chunks), ())
        for d in documents
    ]
    entries = _entries(documents)
    # A bulk load answers no request: each step has the stores' own timeouts.
    steps = (
        ("manifest", lambda: storage.manifest.begin_run(intents, unrequested_deadline())),
        # Rows as lists, as the Indexer passes them (pipeline: vectors.tolist()).
        (
            "vectors",
            lambda: storage.vectors.upsert(chunks, vectors.tolist(), unrequested_deadline()),
        ),
        ("lexical", lambda: storage.lexical.upsert(chunks, unrequested_deadline())),
        (
            "manifest",
            lambda: storage.manifest.commit_run(generation, entries, [], unrequested_deadline()),
        ),
    )
    for part, step in steps:
        started = time.perf_counter()
        step()
        report.add_time(part, time.perf_counter() - started)
    report.generation = generation
    report.documents += len(documents)
    report.chunks += len(chunks)
    report.scopes.update(d.scope_id for d in documents for _ in d.chunks)
    report.locales.update(d.locale for d in documents for _ in d.chunks)


def _entries(documents: list[SyntheticDocument]) -> list[ManifestEntry]:
    return [_entry(document) for document in documents]


def build_index(
    corpus: SyntheticCorpus,
    data_dir: Path,
    docs_per_run: int = DOCS_PER_RUN,
    memory_cap_mib: int | None = None,
    optimize_apart: bool = False,
    optimize_each_run: bool = False,
    probe: LoadProbe | None = None,
) -> BuildReport:
    """A fresh embedded index of the corpus in `data_dir` (which must not exist);
    with `memory_cap_mib`, written and built inside that hard memory limit
    (bench.common.memory_cap: the kernel drops mapped file pages at the limit
    and kills the process if its own memory outgrows it; a child started
    inside shares the limit). `optimize_each_run`: the optimizer asked after
    every run, as the Indexer asks it during a load (`settle=False`: the
    store may defer a build), and once more at the end, as the Indexer's
    idle settle asks it; otherwise only once, after the last run. `probe`:
    vector searches timed between runs and after the build (their time is
    kept apart, as "load probe")."""
    if data_dir.exists():
        raise FileExistsError(f"{data_dir} exists: the scale bench builds fresh indexes only")
    # By default built in this process: nothing queries it yet, and the record
    # times the engine's HNSW build itself (no shard copy, no child process).
    # `optimize_apart`: as the Indexer builds by default (a copy of the shard,
    # optimised by a child process, swapped in).
    settings = StoreSettings(
        data_dir=data_dir, store_mode=StoreMode.EMBEDDED, vector_optimize_apart=optimize_apart
    )
    storage = open_storage(settings, int(corpus.source.vectors.shape[1]))
    report = BuildReport()
    # The sampler starts first, so it stays outside the limit it watches.
    with MemoryPeaks() as parts:
        report.mark_peak("before writing", parts)
        cap = MemoryCap(memory_cap_mib) if memory_cap_mib else None
        with cap or contextlib.nullcontext():
            try:
                _write_all(storage, corpus, docs_per_run, report, parts, optimize_each_run, probe)
            finally:
                started = time.perf_counter()
                storage.close()
                report.add_time("close (flush)", time.perf_counter() - started)
                report.mark_peak("closed", parts)
    if cap is not None and cap.report is not None:
        report.memory_cap = cap.report.as_record()
    return report


def _write_all(
    storage: Storage,
    corpus: SyntheticCorpus,
    docs_per_run: int,
    report: BuildReport,
    parts: MemoryPeaks,
    optimize_each_run: bool = False,
    probe: LoadProbe | None = None,
) -> None:
    started = time.perf_counter()
    children_before = _children_peak_mib()
    for generation, documents in enumerate(document_runs(corpus, docs_per_run), start=1):
        _write_run(storage, generation, documents, report)
        if optimize_each_run:
            _optimize(storage, report, settle=False)
        if probe is not None:
            _timed(report, "load probe", partial(probe.after_run, storage, generation))
        if generation % 100 == 0:
            print(f"  {report.chunks} chunks written", flush=True)
    report.add_time("generate", time.perf_counter() - started - sum(report.seconds.values()))
    report.mark_peak("rows written", parts)
    _optimize(storage, report, settle=True)  # the load's end, as the Indexer settles it
    report.mark_peak("vector index (HNSW)", parts)
    if probe is not None:
        _timed(report, "load probe", partial(probe.settled, storage, report.generation))
    children_after = _children_peak_mib()
    # The kernel keeps one maximum over all waited-for children (earlier
    # sizes' stacks included): it names the optimiser only if it rose.
    if children_after > children_before:
        report.optimizer_child_peak_rss_mib = children_after


def _optimize(storage: Storage, report: BuildReport, settle: bool) -> None:
    started = time.perf_counter()
    if storage.vectors.optimize(settle=settle):
        report.optimizations += 1
    report.add_time("vector index (HNSW)", time.perf_counter() - started)


def _timed(report: BuildReport, part: str, step: Callable[[], None]) -> None:
    started = time.perf_counter()
    step()
    report.add_time(part, time.perf_counter() - started)


def _children_peak_mib() -> int:
    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def disk_bytes(data_dir: Path) -> dict[str, int]:
    """Bytes on disk per store (allocated blocks, so sparse files count as used)."""

    def used(path: Path) -> int:
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        return sum(p.stat().st_blocks * 512 for p in files)

    parts = {"vectors": data_dir / "vectors", "lexical": data_dir / "lexical"}
    sizes = {name: used(path) for name, path in parts.items() if path.exists()}
    manifest = [p for p in data_dir.glob(MANIFEST_FILE + "*") if p.is_file()]
    sizes["manifest"] = sum(p.stat().st_blocks * 512 for p in manifest)
    return sizes
