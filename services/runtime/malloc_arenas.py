"""Few malloc arenas, so memory a burst of large requests used goes back.

glibc gives each thread that allocates under contention an arena of its own,
up to 8 per core; memory freed in one is reused only by that arena and is
rarely returned to the system, even by `malloc_trim` (services.runtime.
request_memory), because the arenas' pages stay fragmented. A service here
runs dozens of worker threads (gRPC, store calls, the model), so a burst of
large requests left the stack about 150 MiB higher for good. Measured with
`python -m bench.load.dry_run_memory` (3 rounds of 4 parallel 12 MB dry-run
Upserts, RSS 30 s later; docs/benchmarks.md): +149 to +158 MiB with glibc's
default, +4 MiB with two arenas.

So every service process starts with at most `DEFAULT_ARENAS` arenas, set
before its threads start, unless the operator set glibc's own
`MALLOC_ARENA_MAX` (then glibc applied it already and it is left alone). A
no-op off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping

DEFAULT_ARENAS = 2
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def limit_malloc_arenas(
    environ: Mapping[str, str] = os.environ, arenas: int = DEFAULT_ARENAS
) -> bool:
    """True when the limit was set here (glibc, and MALLOC_ARENA_MAX unset)."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
