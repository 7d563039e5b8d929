"""The process's open-file limit, raised at start-up to fit the connections
its servers accept, so that peers cannot take the descriptors the stores need.

Every connection holds a descriptor. Before the servers bounded them, 20,000
idle TCP connections to the Retriever's port (no bytes sent, no TLS needed)
took every descriptor of the stack's process: the Indexer's next commit failed
with "Too many open files" and the lexical store's writer died with it
(services/storage/embedded/tantivy_store.py now opens a new one). Each server
now accepts at most its bound (`RAG_GRPC_MAX_CONNECTIONS`,
`RAG_GATEWAY_MAX_CONNECTIONS`) and the limit is raised to fit them all plus a
reserve for everything else the process opens.
"""

from __future__ import annotations

import resource
import threading

from services.core.errors import ConfigError
from services.core.logging import get_logger

log = get_logger(__name__)

# Descriptors kept for the process's own files besides connections: store
# segments and journals, SQLite, logs, model files, client channels.
RESERVED_DESCRIPTORS = 1024

_lock = threading.Lock()
_promised = 0  # connections the servers of this process may hold, in all


def reserve_connections(connections: int, setting: str) -> None:
    """Count `connections` more for this process and raise the soft limit on
    open files to fit every server's bound plus the reserve. A ConfigError
    naming `setting` (e.g. `RAG_GRPC_MAX_CONNECTIONS=1024`) when the hard
    limit does not fit even this server's bound; a warning when it fits each
    bound but not all of them at once."""
    global _promised
    with _lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        alone = connections + RESERVED_DESCRIPTORS
        if hard != resource.RLIM_INFINITY and hard < alone:
            raise ConfigError(
                f"{setting} needs {alone} open files with {RESERVED_DESCRIPTORS} kept for the "
                f"process's own files, and it may open at most {hard} (ulimit -Hn): lower "
                "the setting or raise the limit"
            )
        needed = _promised + alone
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            log.warning("open_files_short", needed=needed, limit=hard, setting=setting)
        _promised += connections


def release_connections(connections: int) -> None:
    """A server stopped: its bound no longer counts (the limit stays raised)."""
    global _promised
    with _lock:
        _promised = max(0, _promised - connections)
