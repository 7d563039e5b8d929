"""A run that could fill the embedded data folder's disk is refused before it
writes (UNAVAILABLE, naming RAG_DATA_DIR and the sizes), instead of
ending the process with SIGBUS at a mapped page's first write."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.core.errors import Unavailable
from services.core.models import ContentType, Document
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.disk_room import MIN_FREE_BYTES, DiskRoom
from services.storage.factory import open_storage
from services.storage.settings import StoreMode, StoreSettings


@pytest.mark.unit
def test_the_estimate_counts_vectors_and_text_generously() -> None:
    room = DiskRoom(Path("/"), vector_bytes_per_chunk=4 * (384 + 512))
    # 1,000 chunks of 1 KB: 3.5 MB of vectors and 3 copies of the text, doubled.
    assert room.estimate_bytes(1000, 1_000_000) == 2 * (3_584_000 + 3_000_000)


@pytest.mark.unit
def test_a_run_past_the_reserve_is_refused_by_name(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    room = DiskRoom(tmp_path, vector_bytes_per_chunk=1536, reserve_bytes=free)
    room.check(0, 0)  # a run that writes no chunk (removals) always may
    with pytest.raises(Unavailable) as refused:
        room.check(10, 8000)
    message = str(refused.value)
    assert message.startswith(f"the server is out of disk space: RAG_DATA_DIR={str(tmp_path)!r}")
    assert "this run writes 10 chunks" in message and "nothing was written" in message
    DiskRoom(tmp_path, 1536, reserve_bytes=MIN_FREE_BYTES).check(10, 8000)  # room enough


@pytest.mark.integration
def test_the_indexer_refuses_the_run_and_writes_nothing(tmp_path: Path, embedder: Embedder) -> None:
    settings = StoreSettings(data_dir=tmp_path / "data", store_mode=StoreMode.EMBEDDED)
    storage = open_storage(settings, embedder.dim)
    assert storage.disk_room is not None and storage.disk_room.folder == settings.data_dir
    try:
        pipeline = build_indexing_pipeline(IndexerSettings(), embedder, storage)
        doc = Document(
            doc_id="a",
            text="# A\n\nA page about harbour lanterns.",
            url="https://x.test/a",
            title="A",
            scope_id="site",
            content_type=ContentType.MARKDOWN,
        )
        # As if the disk held only the reserve: the real check on the real folder.
        free = shutil.disk_usage(settings.data_dir).free
        storage.disk_room = DiskRoom(settings.data_dir, 4 * embedder.dim, reserve_bytes=free)
        with pytest.raises(Unavailable, match="nothing was written"):
            pipeline.upsert([doc])
        deadline = unrequested_deadline()
        assert pipeline.manifest.count(deadline=deadline) == 0
        assert pipeline.manifest.open_intents(deadline) == []  # never begun
        assert storage.vectors.count(None, deadline) == 0
        assert pipeline.upsert([doc], dry_run=True).counts.added == 1  # a plan writes nothing
        storage.disk_room = DiskRoom(settings.data_dir, 4 * embedder.dim)
        assert pipeline.upsert([doc]).counts.added == 1  # room again: the same run goes in
    finally:
        storage.close()
