"""Free loopback ports for the servers a test starts."""

from __future__ import annotations

import threading

from bench.common.processes import free_ports

_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A port free now and not handed out before by this process. The system
    may give the same just-released port to two calls in a row; a test that
    starts two listeners on them fails with "Address already in use" (seen in
    CI), so each port is handed out at most once per test process."""
    with _HANDED_OUT_LOCK:
        (port,) = free_ports(1, taken=_HANDED_OUT)
        _HANDED_OUT.add(port)
        return port
