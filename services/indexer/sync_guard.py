"""Two syncs of one scope at once must not remove each other's pages.

A sync in batches sends its pages with Upserts, then a Sync that keeps them
and removes the rest of the scope. Two such syncs of one scope at once (a
cron job overlapping a manual run, two deploy pipelines) each remove what the
other sent; the later one's pages that the earlier one's Sync removed were
not coming back, and both said "done". So each Sync that changes the index
records its generation for its scope (committed with it), and a sync in
batches passes the generation its first batch saw: a Sync of the scope
committed since then is this one's conflict, and this one is refused before
it removes anything (ABORTED: run it again, and it converges on its source).
"""

from __future__ import annotations

from services.core.errors import Aborted

# + scope: the generation of the scope's last Sync that changed the index.
LAST_SYNC_META = "last_sync:"


def check_no_sync_since(last_sync: str | None, since: int, scope_id: str) -> None:
    """Two syncs of one scope at once remove each other's pages: each one's
    Sync removes what the other sent and it did not. A sync in batches says
    which generation its first batch saw; a Sync of the scope committed after
    that one may have removed pages this sync sent, so this one is refused
    before it removes anything, and is run again."""
    if last_sync is not None and int(last_sync) > since:
        raise Aborted(
            f"no_sync_since: another sync of scope {scope_id!r} committed generation "
            f"{last_sync} after this sync's first batch (generation {since}) and may have "
            "removed pages this one sent; nothing was removed: run the sync again"
        )
