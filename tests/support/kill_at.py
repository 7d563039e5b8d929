"""FAULT INJECTION ONLY (test support, never used by the services):
`python -m tests.support.kill_at STEP` runs the real embedded stack
(services.stack) with one real store method wrapped so that the process
SIGKILLs itself the first time that write step is reached, as a power cut
or an OOM kill would: no exception handler, no undo, no flush.

Steps (the order a run writes in):
  vector_write   before the first vector upsert (intents already recorded)
  lexical_write  between a batch's vector upsert and its lexical upsert
  payload        during a metadata-only update (vectors rewritten, lexical not)
  delete         during a delete (vectors deleted, lexical rows not)
  commit         before the manifest commit (every store write landed)
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.manifest import PostgresManifest
from services.storage.postgres.vectors import PostgresVectorStore

# Per step, the methods of the embedded and of the PostgreSQL stores (the
# process runs with one of them; the environment chooses, as in production).
TARGETS: dict[str, tuple[tuple[type, str], ...]] = {
    "vector_write": ((EdgeVectorStore, "upsert"), (PostgresVectorStore, "upsert")),
    "lexical_write": ((TantivyLexicalStore, "upsert"), (PostgresLexicalStore, "upsert")),
    "payload": (
        (TantivyLexicalStore, "update_payload"),
        (PostgresLexicalStore, "update_payload"),
    ),
    "delete": ((TantivyLexicalStore, "delete"), (PostgresLexicalStore, "delete")),
    "commit": ((SqliteManifest, "commit_run"), (PostgresManifest, "commit_run")),
}


def killing(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and args[0]:  # an empty write is not a write step
            os.kill(os.getpid(), signal.SIGKILL)
        return method(self, *args, **kwargs)

    return wrapper


def main(step: str) -> None:
    for owner, name in TARGETS[step]:
        setattr(owner, name, killing(getattr(owner, name)))
    from services.stack.__main__ import main as stack_main

    stack_main([])


if __name__ == "__main__":
    main(sys.argv[1])
