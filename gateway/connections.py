"""Connection limits uvicorn does not have: a deadline for the request head,
and bounds on open connections, overall and per client.

uvicorn waits for a request's head (request line and headers) as long as the
client keeps the socket open, and its keep-alive timer stops at the first byte
of the next request. A client that sends `GET / HTTP/1.1\\r\\n` and nothing more
holds a connection, and a file descriptor, for ever: measured against the
gateway before this module, one client opened 19,990 such connections in 10 s,
the process ran out of descriptors (`accept`: Too many open files) and no
other client was answered until that client went away.

So, per connection (`GuardedH11Protocol`):
- the head must arrive whole within `head_timeout_s` of the connection's
  start, or of the previous response: else `408 Request Timeout` (when part of
  a head came) or a silent close (when nothing came), like a proxy's
  header timeout. The body has its own deadline (RAG_GATEWAY_BODY_TIMEOUT_S,
  in the app);
- past `max_connections` open connections, or `max_per_client` from one peer
  address, a new connection is answered `503` and closed at once, so the
  descriptors in use stay bounded and a refused client learns why. A trusted
  proxy (RAG_GATEWAY_FORWARDED_ALLOW_IPS) is exempt from the per-client
  bound: it carries many clients, and guarding its own connections is its job.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.clientip import is_trusted_peer
from gateway.settings import IpNetwork

_REFUSAL = (
    b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n%s\r\n%s"
)

RefusalObserver = Callable[[str], None]


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout_s: float
    max_connections: int
    max_per_client: int
    trusted_proxies: Sequence[IpNetwork] = ()


class ConnectionLedger:
    """Open connections, overall and per peer address, of one server."""

    def __init__(self, limits: ConnectionLimits, on_refused: RefusalObserver | None = None):
        self.limits = limits
        self.on_refused = on_refused
        self.total = 0
        self.by_peer: Counter[str] = Counter()

    def admit(self, peer: str) -> str | None:
        """Count a new connection from `peer`, or say why it is refused
        (`too_many_connections`, `too_many_client_connections`)."""
        if self.total >= self.limits.max_connections:
            return "too_many_connections"
        exempt = is_trusted_peer(peer, self.limits.trusted_proxies)
        if not exempt and self.by_peer[peer] >= self.limits.max_per_client:
            return "too_many_client_connections"
        self.total += 1
        self.by_peer[peer] += 1
        return None

    def release(self, peer: str) -> None:
        self.total -= 1
        self.by_peer[peer] -= 1
        if self.by_peer[peer] <= 0:
            del self.by_peer[peer]

    def refused(self, reason: str) -> None:
        if self.on_refused is not None:
            self.on_refused(reason)


def guarded_protocol(ledger: ConnectionLedger) -> type[H11Protocol]:
    """uvicorn's h11 protocol bound to `ledger` (uvicorn builds one protocol
    object per connection from the class it is given)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"ledger": ledger})


class GuardedH11Protocol(H11Protocol):
    ledger: ConnectionLedger

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # bytes of the head being waited for
        self._peer: str | None = None  # set once admitted

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else ""
        reason = self.ledger.admit(peer)
        if reason is not None:
            self.ledger.refused(reason)
            self._refuse(503, b"Service Unavailable", reason, b"retry-after: 1\r\n")
            return
        self._peer = peer
        self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        if self._peer is not None:
            self.ledger.release(self._peer)
            self._peer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is not None:
            self._head_bytes += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request's head arrived whole
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        # Armed first: the call below may start a pipelined request at once,
        # whose arrival stops the timer again.
        self._wait_for_head()
        super().on_response_complete()

    def _wait_for_head(self) -> None:
        self._stop_head_timer()
        if self.transport.is_closing():
            return
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(
            self.ledger.limits.head_timeout_s, self._head_too_slow
        )

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_bytes == 0:
            self.transport.close()  # an idle connection: nothing to answer
            return
        self.ledger.refused("head_timeout")
        self._refuse(408, b"Request Timeout", "head_timeout", b"")

    def _refuse(self, status: int, phrase: bytes, reason: str, extra: bytes) -> None:
        """A whole response written past h11 (which answers only a request
        it has read), then the connection closed."""
        body = f"{reason}\n".encode("ascii")
        self.transport.write(_REFUSAL % (status, phrase, len(body), extra, body))
        self.transport.close()
