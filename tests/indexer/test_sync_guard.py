"""Two syncs of one scope at once do not remove each other's pages: the Sync
whose first batch came before the other's Sync is refused (ABORTED) before it
removes anything, and runs again to its source."""

from __future__ import annotations

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.core.errors import Aborted
from services.indexer.sync_guard import check_no_sync_since
from tests.support.stack import BackgroundStack


def page(doc_id: str) -> ipb.Document:
    return ipb.Document(
        doc_id=doc_id, text=f"# {doc_id}\n\nThe page {doc_id} of the handbook.", scope_id="hb"
    )


def key(doc_id: str) -> ipb.DocumentKey:
    return ipb.DocumentKey(doc_id=doc_id, locale="en")


def sync(stack: BackgroundStack, keep: list[str], since: int | None) -> ipb.UpsertResponse:
    request = ipb.SyncRequest(scope_id="hb", keep=[key(d) for d in keep])
    if since is not None:
        request.no_sync_since = since
    reply: ipb.UpsertResponse = stack.indexer.Sync(request, timeout=60)
    return reply


def scope_ids(stack: BackgroundStack) -> set[str]:
    reply = stack.indexer.Sync(ipb.SyncRequest(scope_id="hb", dry_run=True), timeout=60)
    return {o.doc_id for o in reply.outcomes}  # a dry run of an empty sync: every page


@pytest.mark.integration
def test_the_sync_that_comes_second_is_refused_and_its_rerun_converges(
    empty_stack: BackgroundStack,
) -> None:
    stack = empty_stack
    stack.upsert([page("old")])
    sync(stack, ["old"], since=None)  # an earlier sync of the scope

    # Sync B sends its first batch; sync A then runs whole (batch and Sync).
    b_first = stack.upsert([page("b1")])
    assert b_first.committed_generation > 0
    a_first = stack.upsert([page("a1")])
    assert a_first.committed_generation == b_first.committed_generation + 1
    a_sync = sync(stack, ["a1"], since=a_first.committed_generation)
    assert a_sync.committed_generation > a_first.committed_generation
    assert scope_ids(stack) == {"a1"}  # A removed B's page (and the old one)

    # B's next batch goes in; its Sync is refused before it removes anything.
    stack.upsert([page("b2")])
    with pytest.raises(grpc.RpcError) as refused:
        sync(stack, ["b1", "b2"], since=b_first.committed_generation)
    assert refused.value.code() == grpc.StatusCode.ABORTED
    details = refused.value.details() or ""
    assert "another sync of scope 'hb'" in details and "run the sync again" in details
    assert scope_ids(stack) == {"a1", "b2"}  # A's page stays: B removed nothing

    # B runs again: its pages, then a Sync that nothing came between.
    again = stack.upsert([page("b1"), page("b2")])
    sync(stack, ["b1", "b2"], since=again.committed_generation)
    assert scope_ids(stack) == {"b1", "b2"}


@pytest.mark.integration
def test_a_sync_without_the_guard_and_one_after_its_own_batches_run_as_before(
    empty_stack: BackgroundStack,
) -> None:
    stack = empty_stack
    first = stack.upsert([page("p1"), page("p2")])
    unchanged = stack.upsert([page("p1")])  # nothing changed: the generation as it was
    assert unchanged.committed_generation == first.committed_generation
    assert sync(stack, ["p1"], since=first.committed_generation).counts.removed == 1
    stack.upsert([page("p3")])
    assert sync(stack, ["p3"], since=None).counts.removed == 1  # no guard asked: none applied


@pytest.mark.unit
def test_the_guard_refuses_only_a_later_sync() -> None:
    check_no_sync_since(None, 5, "hb")  # the scope was never synced
    check_no_sync_since("5", 5, "hb")  # the last sync is the one this sync's first batch saw
    with pytest.raises(Aborted, match=r"^no_sync_since: .*generation 6 after .*generation 5\)"):
        check_no_sync_since("6", 5, "hb")
