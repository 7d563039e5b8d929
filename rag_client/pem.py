"""PEM files read when the settings are made, as gRPC will read them: a
garbage CA bundle or a certificate with the wrong key otherwise surfaced
only on the first call (a client: "Connection refused" after four retries; a
server: "cannot listen", read as a port problem), with the cause on stderr
from gRPC's C core (probes, 2026-12-06)."""

from __future__ import annotations

import ssl
from pathlib import Path


def ca_problem(path: Path) -> str | None:
    """None when `path` holds at least one PEM certificate, else why not."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError) as exc:
        return f"not a PEM certificate bundle ({_reason(exc)})"
    return None


def pair_problem(cert: Path, key: Path) -> str | None:
    """None when `cert` is a PEM certificate (chain) and `key` its private
    key, unencrypted (gRPC takes no pass phrase), else why not."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(str(cert), str(key), password=_no_pass_phrase)
    except _PassPhrase:
        return "the private key is encrypted; gRPC needs it unencrypted"
    except (ssl.SSLError, OSError, ValueError) as exc:
        return f"not a PEM certificate and its private key ({_reason(exc)})"
    return None


class _PassPhrase(Exception):
    pass


def _no_pass_phrase() -> str:
    raise _PassPhrase


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason and exc.reason != "PEM lib":
        return str(exc.reason).lower().replace("_", " ")
    if isinstance(exc, ssl.SSLError):
        return "no PEM block could be read"
    return str(exc)[:200]
