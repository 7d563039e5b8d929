"""The crash loop's verdict (tests.support.crash_loop), taken on the stack
restarted after the last kill:

- `verify` through the operator CLI (`python -m services.operator.cli
  verify --json`): the manifest, the vector store and the lexical store
  compared id by id;
- every acknowledged document found by its unique token through Retrieve;
- a dry-run Upsert of every document ever sent: a document is either wholly
  there (UNCHANGED, as many chunks as its plan) or not at all (ADDED);
- then, the stack stopped, the three parts read directly: per document, the
  manifest's chunk ids, the vector rows' and the lexical rows' must be the
  same set, of the planned size, or all empty.

A document that is none of "wholly there" and "not there" is half-visible; an
acknowledged one that is not wholly there, or not found, is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import grpc

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.storage.settings import StoreMode, StoreSettings
from tests.support.built_storage import open_built_storage
from tests.support.crash_clients import token_of
from tests.support.crash_loop import ROOT, CrashLoop

DRY_RUN_BATCH = 500
FIND_ATTEMPTS = 3  # a degraded answer (a channel late on a loaded machine) is asked again


@dataclass(frozen=True)
class DocumentRows:
    """One document's chunk ids in each part, and what a dry run plans."""

    manifest: frozenset[str]
    vectors: frozenset[str]
    lexical: frozenset[str]
    planned_state: int
    planned_chunks: int

    @property
    def whole(self) -> bool:
        return (
            bool(self.manifest)
            and self.manifest == self.vectors == self.lexical
            and len(self.manifest) == self.planned_chunks
            and self.planned_state == ipb.DOCUMENT_STATE_UNCHANGED
        )

    @property
    def absent(self) -> bool:
        nothing = not (self.manifest or self.vectors or self.lexical)
        return nothing and self.planned_state == ipb.DOCUMENT_STATE_ADDED


def run_verify(indexer_addr: str) -> dict[str, Any]:
    """The operator's audit, as an operator runs it."""
    cli = [sys.executable, "-m", "services.operator.cli", "--addr", indexer_addr]
    result = subprocess.run(
        [*cli, "--timeout", "600", "verify", "--json", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        report = {"error": result.stderr[-2000:] or result.stdout[-2000:]}
    report["exit_status"] = result.returncode
    return report


def found_by_token(loop: CrashLoop, doc_id: str) -> bool:
    # A token is a lexical match; the vector rows are checked in the stores.
    request = rpb.RetrieveRequest(
        query=token_of(doc_id), top_k=10, disable_rerank=True, channels=[rpb.CHANNEL_LEXICAL]
    )
    for _ in range(FIND_ATTEMPTS):
        try:
            reply = loop.endpoints.retriever().Retrieve(request, timeout=60)
        except grpc.RpcError:
            time.sleep(1)
            continue
        if doc_id in {hit.doc_id for hit in reply.hits}:
            return True
        if not reply.degraded:
            return False
        time.sleep(1)
    return False


def planned(loop: CrashLoop) -> dict[str, tuple[int, int]]:
    """doc_id -> (state, chunks) of a dry-run Upsert of every document sent."""
    docs = list(loop.ledger.documents.values())
    plan: dict[str, tuple[int, int]] = {}
    for start in range(0, len(docs), DRY_RUN_BATCH):
        request = ipb.UpsertRequest(documents=docs[start : start + DRY_RUN_BATCH], dry_run=True)
        reply = loop.endpoints.indexer().Upsert(request, timeout=600)
        plan.update((o.doc_id, (o.state, o.chunks)) for o in reply.outcomes)
    return plan


def store_settings(loop: CrashLoop) -> StoreSettings:
    env = loop.config.store_env
    if "POSTGRES_URL" in env:
        return StoreSettings(
            POSTGRES_URL=env["POSTGRES_URL"],
            POSTGRES_SCHEMA=env.get("POSTGRES_SCHEMA", "rag"),
            data_dir=loop.config.data_dir,
        )
    return StoreSettings(data_dir=loop.config.data_dir, store_mode=StoreMode.EMBEDDED)


def rows_by_document(settings: StoreSettings, dim: int) -> dict[str, dict[str, set[str]]]:
    """part -> doc_id -> chunk ids, read directly (the stack stopped)."""
    parts: dict[str, dict[str, set[str]]] = {
        name: defaultdict(set) for name in ("manifest", "vectors", "lexical")
    }
    storage = open_built_storage(settings, dim)
    try:
        for entry in storage.manifest.entries():
            parts["manifest"][entry.doc_id].update(entry.chunk_ids)
        for name, store in (("vectors", storage.vectors), ("lexical", storage.lexical)):
            for page in store.scan():
                for row in page:
                    parts[name][row.doc_id].add(row.chunk_id)
    finally:
        storage.close()
    return parts


def classify(loop: CrashLoop, plan: dict[str, tuple[int, int]], dim: int) -> dict[str, Any]:
    parts = rows_by_document(store_settings(loop), dim)
    half, lost, visible_unacked = [], [], 0
    acknowledged = loop.ledger.acknowledged
    for doc_id in loop.ledger.documents:
        state, chunks = plan.get(doc_id, (ipb.DOCUMENT_STATE_UNSPECIFIED, -1))
        manifest, vectors, lexical = (
            frozenset(parts[name].get(doc_id, ())) for name in ("manifest", "vectors", "lexical")
        )
        rows = DocumentRows(manifest, vectors, lexical, state, chunks)
        if not (rows.whole or rows.absent):
            half.append(doc_id)
        if doc_id in acknowledged:
            if not rows.whole or chunks != acknowledged[doc_id]:
                lost.append(doc_id)
        elif rows.whole:
            visible_unacked += 1
    strays = set(parts["vectors"]) | set(parts["lexical"]) | set(parts["manifest"])
    return {
        "half_visible": half,
        "lost_in_stores": lost,
        "unacknowledged_visible": visible_unacked,
        "unknown_documents": sorted(strays - set(loop.ledger.documents)),
    }


def writes_cut_by_kills(loop: CrashLoop) -> int:
    """Upsert calls in flight when a kill landed."""
    kills = loop.figures.kill_times
    return sum(
        1 for b in loop.ledger.batches if any(b.started <= kill <= b.ended for kill in kills)
    )


def audit(loop: CrashLoop) -> dict[str, Any]:
    """The figures of a finished loop; stops its stack."""
    assert loop.stack is not None
    indexer_addr = loop.stack.addrs[0]
    verify = run_verify(indexer_addr)
    not_found = [d for d in loop.ledger.acknowledged if not found_by_token(loop, d)]
    plan = planned(loop)
    dim = loop.endpoints.indexer().Stats(ipb.StatsRequest(), timeout=60).embedding_dim
    loop.stack.stop()
    stores = classify(loop, plan, dim)
    lost = sorted(set(not_found) | set(stores["lost_in_stores"]))
    ledger = loop.ledger
    return {
        **loop.figures.summary(),
        "acknowledged": len(ledger.acknowledged),
        "unacknowledged": len(ledger.unacknowledged()),
        "unacknowledged_visible": stores["unacknowledged_visible"],
        "writes": len(ledger.batches),
        "writes_cut_by_kills": writes_cut_by_kills(loop),
        "write_errors": dict(ledger.errors),
        "rejected": ledger.rejected[:20],
        "lost": len(lost),
        "lost_ids": lost[:20],
        "not_found_by_token": len(not_found),
        "half_visible": len(stores["half_visible"]),
        "half_visible_ids": stores["half_visible"][:20],
        "unknown_documents": stores["unknown_documents"][:20],
        "verify_clean": bool(verify.get("clean")) and verify["exit_status"] == 0,
        "verify": {k: v for k, v in verify.items() if k != "findings"}
        | {"findings": verify.get("findings", [])[:20]},
        "reader": loop.reader.figures.summary(),
    }
