"""The form of a store's URL, checked when the settings load: a mistake
(`QDRANT_URL=qdrant`, `POSTGRES_URL=garbage`) is refused before a model loads,
naming the variable, instead of failing on the first connection."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_HTTP_SCHEMES = ("http", "https")
_POSTGRES_SCHEMES = ("postgresql", "postgres")
# libpq's other form: `host=db port=5432 dbname=rag user=rag` (keyword=value pairs).
_CONNINFO_PAIR = re.compile(r"^\s*[a-z_]+\s*=")


def check_http_url(url: str) -> None:
    """ValueError unless `url` is http(s)://host[:port][/path]."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in _HTTP_SCHEMES or not parts.hostname:
        raise ValueError("not an http(s) URL with a host, such as https://host:port")
    if not _port_parses(url):
        raise ValueError("the port is not a number from 1 to 65535")


def check_postgres_url(url: str) -> None:
    """ValueError unless `url` is a postgresql:// URL with a host or a socket
    folder, or a libpq keyword=value string. The message never quotes it
    (it may hold a password)."""
    text = url.strip()
    if _CONNINFO_PAIR.match(text):
        return
    parts = urlsplit(text)
    if parts.scheme.lower() not in _POSTGRES_SCHEMES:
        raise ValueError(
            "not a PostgreSQL URL (postgresql://user:password@host:5432/database) or a "
            "keyword=value connection string (host=... dbname=...)"
        )
    if not _port_parses(text):
        raise ValueError("the port is not a number from 1 to 65535")


def _port_parses(url: str) -> bool:
    try:
        port = urlsplit(url.strip()).port
    except ValueError:
        return False
    return port is None or 1 <= port <= 65535
