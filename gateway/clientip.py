"""Which address a request is counted under (rate limits, log hashes).

X-Forwarded-For is written by whoever sends the request, so it is believed
only from a configured proxy (RAG_GATEWAY_FORWARDED_ALLOW_IPS; none by
default, not even loopback: a local caller is a client like any other).
Behind trusted proxies the chain is read from the right: each proxy appends
the address it received the request from, so the right-most address that is
not itself a trusted proxy is the client; everything to its left was written
by that client and is ignored.

The app does this itself rather than through uvicorn's proxy-headers option
(which `python -m gateway` turns off), so the rule is the same whichever
server runs the app and it is covered by the app's tests.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from gateway.settings import IpNetwork

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def client_address(
    peer: str | None, forwarded_for: Iterable[str], trusted: Sequence[IpNetwork]
) -> str | None:
    """The client of a request from `peer` carrying the X-Forwarded-For header
    values `forwarded_for` (in the order received)."""
    peer_address = parse_address(peer or "")
    if peer_address is None:
        return peer  # not an IP peer (a Unix socket, a test client): as it is
    if not _is_trusted(peer_address, trusted):
        return str(peer_address)
    hops = [hop for value in forwarded_for for hop in value.split(",")]
    client = peer_address
    for hop in reversed(hops):
        address = parse_address(hop)
        if address is None:
            # Not an address (e.g. "unknown"): keep the proxy that passed it
            # on. Its clients then share one limit, rather than choosing theirs.
            break
        client = address
        if not _is_trusted(address, trusted):
            break
    return str(client)


def parse_address(text: str) -> IpAddress | None:
    """An IP address as proxies write it: bare, `v4:port` or `[v6]:port`;
    IPv4-mapped IPv6 (a dual-stack socket's view of IPv4) as IPv4."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted(address: IpAddress, trusted: Sequence[IpNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in trusted)


def is_trusted_peer(peer: str, trusted: Sequence[IpNetwork]) -> bool:
    """Whether the direct peer `peer` is one of the trusted proxies."""
    address = parse_address(peer)
    return address is not None and _is_trusted(address, trusted)
