"""Room on the embedded data folder's disk for a run, checked before it writes.

Why: the embedded stores write through memory-mapped files, which take their
disk space when a page is first written. On a full disk that write ends the
process with SIGBUS: no error, no undo, and in the embedded stack every
in-flight Retrieve dies with it (probe). A start with less than
`MIN_FREE_BYTES` is refused (`factory.usable_data_dir`); a run could still
fill the disk later. So before a run writes, the Indexer asks for its
estimated size plus that reserve, and refuses the run when the disk has
less: nothing written, UNAVAILABLE as for any shortage of the machine (the
same run succeeds once space is freed; docs/operations.md). The estimate is deliberately
generous: a refused run is a clear message, a SIGBUS is a lost process.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import Unavailable

# Left free on the data folder's disk, and needed to start: the embedded
# vector store's write-ahead log maps two 32 MiB segments at once (on a fuller
# disk the first write to them ended the process with SIGBUS, probe), and the
# stores' next mapped pages and the manifest's journal take more.
MIN_FREE_BYTES = 128 * 2**20
# Per chunk written: its vectors (float32, each named vector), its text and
# payload in the vector store, the lexical store and the manifest, doubled
# for segments written before the old ones are merged away.
CHUNK_TEXT_COPIES = 3
OVERHEAD_FACTOR = 2


@dataclass(frozen=True)
class DiskRoom:
    """The embedded data folder, what a chunk's vectors take (float32, every
    named vector) and the space left free on its disk."""

    folder: Path
    vector_bytes_per_chunk: int
    reserve_bytes: int = MIN_FREE_BYTES

    def estimate_bytes(self, chunks: int, text_bytes: int) -> int:
        vectors = chunks * self.vector_bytes_per_chunk
        return OVERHEAD_FACTOR * (vectors + CHUNK_TEXT_COPIES * text_bytes)

    def check(self, chunks: int, text_bytes: int) -> None:
        """Unavailable, naming RAG_DATA_DIR and both sizes, when a run
        writing `chunks` new chunks of `text_bytes` could leave less than the
        reserve free."""
        if chunks == 0:
            return  # removals and payload rewrites: they free as much as they take
        needed = self.estimate_bytes(chunks, text_bytes)
        free = shutil.disk_usage(self.folder).free
        if free - needed < self.reserve_bytes:
            raise Unavailable(
                f"the server is out of disk space: RAG_DATA_DIR={str(self.folder)!r} has "
                f"{free // 2**20} MiB free; this run writes {chunks} chunks, about "
                f"{_mib(needed)} MiB, and {self.reserve_bytes // 2**20} MiB must stay free: "
                "nothing was written "
                "(free disk space, or send fewer documents per run)"
            )


def _mib(size: int) -> int:
    return max(1, -(-size // 2**20))
