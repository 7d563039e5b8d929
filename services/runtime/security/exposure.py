"""The start-up rule for where a server may listen and how.

On a loopback address (the embedded quick start) plaintext and no caller
identity are fine: only this machine can connect. Anywhere else the server
needs TLS and a callers list, unless `RAG_ALLOW_INSECURE=true` says the
network is trusted by other means (a service mesh doing mTLS, a private test
network): this is the setting the error names."""

from __future__ import annotations

import ipaddress

from services.core.errors import ConfigError

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost, or "": all interfaces


def check_exposure(host: str, *, tls: bool, auth: bool, allow_insecure: bool) -> None:
    """Raise ConfigError when a non-loopback server would run without TLS or auth."""
    if is_loopback(host) or allow_insecure:
        return
    missing = [
        text
        for ok, text in (
            (tls, "TLS (RAG_TLS_CERT_FILE and RAG_TLS_KEY_FILE)"),
            (auth, "caller identity (RAG_AUTH_CALLERS_FILE or RAG_AUTH_CALLERS)"),
        )
        if not ok
    ]
    if missing:
        raise ConfigError(
            f"RAG_HOST={host!r} is not a loopback address, and this server would run without "
            f"{' and without '.join(missing)}. Configure them (docs/security.md), bind "
            "RAG_HOST=127.0.0.1, or set RAG_ALLOW_INSECURE=true if the network is secured "
            "otherwise (e.g. a service mesh)"
        )
