"""`ingest --sync` passes its first batch's generation to its Sync, and a Sync
refused because another sync of the scope came between says to run again
(exit status 1, as for a sync refused for an empty source)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from rag_client.errors import error_for
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.operator import cli

pytestmark = pytest.mark.unit


class RecordingIndexer:
    """A labelled fake Indexer client: each batch commits one generation from
    `first`; the Sync records the guard it was sent, or fails as told."""

    def __init__(self, first: int, refuse_sync: bool = False) -> None:
        self.generation = first - 1
        self.refuse_sync = refuse_sync
        self.sync_guard: int | str | None = "not called"

    def upsert_stream(self, documents: list[Any], **kwargs: Any) -> Iterator[ipb.UpsertProgress]:
        self.generation += 1
        counts = ipb.PlanCounts(added=len(documents))
        result = ipb.UpsertResponse(counts=counts, committed_generation=self.generation)
        yield ipb.UpsertProgress(documents_done=len(documents), result=result)

    def sync(self, scope: str, keep: list[Any], **kwargs: Any) -> ipb.UpsertResponse:
        self.sync_guard = kwargs.get("no_sync_since")
        if self.refuse_sync:
            details = f"no_sync_since: another sync of scope {scope!r} committed ... again"
            raise error_for(grpc.StatusCode.ABORTED, details, method="Sync")
        return ipb.UpsertResponse(counts=ipb.PlanCounts(removed=1))

    def close(self) -> None:
        pass


def run(monkeypatch: pytest.MonkeyPatch, folder: Path, fake: RecordingIndexer) -> int:
    monkeypatch.setattr(cli, "indexer_client", lambda addr, timeout: fake)
    argv = ["ingest", str(folder), "--scope", "s", "--sync", "--batch", "1", "--quiet"]
    return cli.main(["--addr", "127.0.0.1:9", *argv])


def pages(folder: Path) -> Path:
    for name in ("a", "b", "c"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nText of {name}.\n", encoding="utf-8")
    return folder


def test_the_sync_carries_the_generation_its_first_batch_saw(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = RecordingIndexer(first=41)
    assert run(monkeypatch, pages(tmp_path), fake) == 0
    assert fake.generation == 43  # three batches
    assert fake.sync_guard == 41  # the first one's, not the last one's


def test_a_refused_sync_exits_1_reports_the_batches_and_says_to_run_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, pages(tmp_path), RecordingIndexer(7, refuse_sync=True)) == 1
    out, err = capsys.readouterr()
    assert "sync refused: another sync of scope 's' committed" in err
    assert "added=3" in out + err  # the batches went in, and the summary says so
    assert "Traceback" not in err
