"""Connection limits uvicorn does not have: deadlines for the request head
and for a client that stops reading, and bounds on open connections, overall
and per client; and a few HTTP/1.1 framing rules it leaves to the app.

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
  One client is a peer address, IPv6 addresses grouped by /64 as the rate
  limits group them;
- a client that stops reading (the send buffer full, or a closing
  connection's last bytes unsent) is cut after `send_timeout_s`: before, a
  connection whose answers were never read was held with no limit;
- a request with both Content-Length and Transfer-Encoding is answered and
  the connection closed (RFC 9112 §6.1), so bytes after its body are never
  read as a request a proxy did not see; a malformed request on a connection
  that must close is closed without uvicorn's traceback; an `Upgrade` header
  (h2c, ...) is served as plain HTTP/1.1 without two warnings per request.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.clientip import is_trusted_peer, parse_address
from gateway.quotas import client_key
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
    send_timeout_s: float = 10.0
    max_head_bytes: int = 16 * 1024  # h11's bound on a head still arriving


class ConnectionLedger:
    """Open connections, overall and per peer address, of one server."""

    def __init__(self, limits: ConnectionLimits, on_refused: RefusalObserver | None = None):
        self.limits = limits
        self.on_refused = on_refused
        self.total = 0
        self.by_peer: Counter[str] = Counter()

    def admit(self, peer: str) -> tuple[str, str | None]:
        """Count a new connection from `peer`: (the key it is counted under,
        None), or (the key, why it is refused: `too_many_connections`,
        `too_many_client_connections`). The key is the rate limits' client
        key, so the IPv6 addresses of one /64 share one bound."""
        address = parse_address(peer)
        key = client_key(str(address) if address is not None else peer)
        if self.total >= self.limits.max_connections:
            return key, "too_many_connections"
        exempt = is_trusted_peer(peer, self.limits.trusted_proxies)
        if not exempt and self.by_peer[key] >= self.limits.max_per_client:
            return key, "too_many_client_connections"
        self.total += 1
        self.by_peer[key] += 1
        return key, None

    def release(self, key: str) -> None:
        self.total -= 1
        self.by_peer[key] -= 1
        if self.by_peer[key] <= 0:
            del self.by_peer[key]

    def refused(self, reason: str) -> None:
        if self.on_refused is not None:
            self.on_refused(reason)


class _Timer:
    """At most one pending call of `callback`, `seconds` after `start()`."""

    def __init__(self, seconds: float, callback: Callable[[], None]) -> None:
        self.seconds, self.callback = seconds, callback
        self._handle: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start, unless it runs already."""
        if self._handle is None:
            self._handle = loop.call_later(self.seconds, self._fire)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        self.callback()


def guarded_protocol(ledger: ConnectionLedger) -> type[H11Protocol]:
    """uvicorn's h11 protocol bound to `ledger` (uvicorn builds one protocol
    object per connection from the class it is given)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"ledger": ledger})


class GuardedH11Protocol(H11Protocol):
    ledger: ConnectionLedger

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = self.ledger.limits
        self._head_timer = _Timer(limits.head_timeout_s, self._head_too_slow)
        self._send_timer = _Timer(limits.send_timeout_s, self._send_too_slow)
        self._head_bytes = 0  # bytes of the head being waited for
        self._peer: str | None = None  # its ledger key, once admitted

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        key, reason = self.ledger.admit(self.client[0] if self.client else "")
        if reason is not None:
            self.ledger.refused(reason)
            self._refuse(503, b"Service Unavailable", reason, b"retry-after: 1\r\n")
            return
        self._peer = key
        self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_timer.stop()
        self._send_timer.stop()
        if self._peer is not None:
            self.ledger.release(self._peer)
            self._peer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer.running:
            self._head_bytes += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:  # a head arrived whole
            self._head_timer.stop()
            names = {name for name, _ in self.headers}
            if b"content-length" in names and b"transfer-encoding" in names:
                # RFC 9112 §6.1: the body is read as chunked, and the server
                # must close after answering. Kept open, the bytes after the
                # chunked body were read as the next request, one that a proxy
                # framing by Content-Length never saw (request smuggling).
                self.cycle.keep_alive = False

    def send_400_response(self, msg: str) -> None:
        try:
            super().send_400_response(msg)
        except h11.LocalProtocolError:
            # A malformed request after an answered one on a connection that
            # must close (h11's MUST_CLOSE): uvicorn's 400 cannot be framed
            # and its error became a traceback in the log per request.
            self.transport.close()
        self._bound_closing()

    def _unsupported_upgrade_warning(self) -> None:
        # uvicorn logs two warnings per request naming an Upgrade (h2c, ...):
        # 20,000 pipelined requests wrote 4 MB of log. Served as plain HTTP/1.1.
        pass

    def pause_writing(self) -> None:
        """The client stopped reading: it has `send_timeout_s` to start again."""
        super().pause_writing()
        self._send_timer.start(self.loop)

    def resume_writing(self) -> None:
        self._send_timer.stop()
        super().resume_writing()

    def timeout_keep_alive_handler(self) -> None:
        super().timeout_keep_alive_handler()
        self._bound_closing()

    def _bound_closing(self) -> None:
        """A transport closed with unsent bytes waits to send them for as long
        as the client does not read: it gets `send_timeout_s`, then is cut."""
        transport = self.transport
        if transport.is_closing() and transport.get_write_buffer_size() > 0:
            self._send_timer.start(self.loop)

    def _send_too_slow(self) -> None:
        self.ledger.refused("send_timeout")
        self.transport.abort()  # what is unsent is dropped: nobody reads it

    def on_response_complete(self) -> None:
        # Armed first: the call below may start a pipelined request at once,
        # whose arrival stops the timer again.
        self._wait_for_head()
        super().on_response_complete()
        self._bound_closing()  # a response that ended the connection

    def _wait_for_head(self) -> None:
        self._head_timer.stop()
        if self.transport.is_closing():
            return
        self._head_bytes = 0
        self._head_timer.start(self.loop)

    def _head_too_slow(self) -> None:
        if self.transport.is_closing():
            return
        if self._head_bytes == 0:
            self.transport.close()  # an idle connection: nothing to answer
            self._bound_closing()
            return
        self.ledger.refused("head_timeout")
        self._refuse(408, b"Request Timeout", "head_timeout", b"")

    def _refuse(self, status: int, phrase: bytes, reason: str, extra: bytes) -> None:
        """A whole response written past h11 (which answers only a request
        it has read), then the connection closed."""
        body = f"{reason}\n".encode("ascii")
        self.transport.write(_REFUSAL % (status, phrase, len(body), extra, body))
        self.transport.close()
        self._bound_closing()
