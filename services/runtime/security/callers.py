"""Callers, their roles and scopes, and how a credential maps to one.

A callers file (TOML, or JSON in `RAG_AUTH_CALLERS`) lists each caller:

    [[caller]]
    name = "gateway"
    roles = ["reader"]
    scopes = ["docs"]                 # ["*"]: every scope
    token_sha256 = ["<hex>", "<hex>"] # two during a rotation
    token_files = ["/run/secrets/gateway-token"]  # or the token itself, in a file
    cert_names = ["gateway.rag.internal"]         # mTLS: certificate CN or DNS name

Only hashes of tokens need to be on the server. Every presented token is
compared against every known hash in constant time (`hmac.compare_digest`,
no early exit), so timing tells nothing about which caller, or how much of a
token, matched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from services.core.errors import ConfigError

ALL_SCOPES = "*"


class Role(StrEnum):
    READER = "reader"  # Retrieve, IndexStatus, Rerank
    WRITER = "writer"  # Upsert, UpsertStream, Delete, Sync in its scopes
    ADMIN = "admin"  # Stats, Verify (repairs across scopes), RecordRelease; implies all


@dataclass(frozen=True)
class ScopeGrant:
    """The scopes a caller may touch; `scopes=None` means every scope."""

    scopes: frozenset[str] | None

    @classmethod
    def every(cls) -> ScopeGrant:
        return cls(None)

    @classmethod
    def of(cls, names: Iterable[str]) -> ScopeGrant:
        names = frozenset(names)
        return cls(None if ALL_SCOPES in names else names)

    def allows(self, scope_id: str) -> bool:
        return self.scopes is None or scope_id in self.scopes

    @property
    def sole(self) -> str | None:
        """The one scope, when the grant names exactly one."""
        if self.scopes is not None and len(self.scopes) == 1:
            return next(iter(self.scopes))
        return None

    def describe(self) -> str:
        return "every scope" if self.scopes is None else ", ".join(sorted(self.scopes)) or "none"


@dataclass(frozen=True)
class Caller:
    name: str
    roles: frozenset[Role]
    scopes: ScopeGrant

    def has(self, role: Role) -> bool:
        return role in self.roles or Role.ADMIN in self.roles


# Auth switched off (loopback quick start): every call acts with every right.
UNRESTRICTED = Caller("local", frozenset(Role), ScopeGrant.every())


@dataclass(frozen=True)
class CallerEntry:
    caller: Caller
    token_digests: tuple[bytes, ...]
    cert_names: frozenset[str]


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.strip().encode()).digest()


# Told of a token file a reload could not read (where, path, why): that
# credential is left out and the rest of the list applies.
UnreadableToken = Callable[[str, str, str], None]


class CallerRegistry:
    """Known callers; look one up by token or by certificate names.
    `token_files`: the files its tokens were read from (a reload watches them)."""

    def __init__(self, entries: Sequence[CallerEntry], token_files: Sequence[str] = ()) -> None:
        self.entries = tuple(entries)
        self.token_files = tuple(token_files)
        self._digests = [(d, e.caller) for e in self.entries for d in e.token_digests]

    def by_token(self, token: str) -> Caller | None:
        presented = token_digest(token)
        found: Caller | None = None
        for digest, caller in self._digests:  # no early exit: constant time
            if hmac.compare_digest(presented, digest):
                found = caller
        return found

    def by_cert_names(self, names: Iterable[str]) -> Caller | None:
        wanted = set(names)
        for entry in self.entries:
            if entry.cert_names & wanted:
                return entry.caller
        return None


def parse_callers(
    data: Mapping[str, Any], origin: str, unreadable: UnreadableToken | None = None
) -> CallerRegistry:
    """Build a registry from the parsed file; ConfigError names the caller and field.
    `unreadable` None: a token file that cannot be read is a ConfigError (start-up)."""
    raw = data.get("caller", data.get("callers"))
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{origin}: expected a non-empty list of [[caller]] entries")
    entries = [_entry(item, origin, i, unreadable) for i, item in enumerate(raw)]
    names = [e.caller.name for e in entries]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: caller names must be unique ({sorted(names)})")
    _check_tokens_apart(entries, origin)
    files = [path for item in raw for path in item.get("token_files", [])]
    return CallerRegistry(entries, files)


def _check_tokens_apart(entries: Sequence[CallerEntry], origin: str) -> None:
    """One token, one caller: two callers sharing one would act as whichever
    the lookup met last (a gateway's token could be an admin's)."""
    owner: dict[bytes, str] = {}
    for entry in entries:
        for digest in set(entry.token_digests):
            other = owner.setdefault(digest, entry.caller.name)
            if other != entry.caller.name:
                raise ConfigError(
                    f"{origin}: callers {other!r} and {entry.caller.name!r} share a token; "
                    "give each caller its own"
                )


def _entry(
    item: Any, origin: str, index: int, unreadable: UnreadableToken | None = None
) -> CallerEntry:
    where = f"{origin}: caller #{index + 1}"
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ConfigError(f"{where}: needs a non-empty 'name'")
    where = f"{origin}: caller {item['name']!r}"
    roles = _strings(item, "roles", where)
    unknown = sorted(set(roles) - {r.value for r in Role})
    if not roles or unknown:
        raise ConfigError(f"{where}: roles must be some of reader, writer, admin (got {roles})")
    scopes = _strings(item, "scopes", where)
    if not scopes:
        raise ConfigError(f'{where}: scopes must list scope ids, or "*" for every scope')
    hashes, files = _strings(item, "token_sha256", where), _strings(item, "token_files", where)
    cert_names = frozenset(_strings(item, "cert_names", where))
    if not hashes and not files and not cert_names:
        raise ConfigError(f"{where}: needs token_sha256, token_files or cert_names")
    digests = tuple(_hex_digest(h, where) for h in hashes)
    digests += _file_digests(files, where, unreadable)
    caller = Caller(item["name"], frozenset(Role(r) for r in roles), ScopeGrant.of(scopes))
    return CallerEntry(caller, digests, cert_names)


def _strings(item: dict[str, Any], key: str, where: str) -> list[str]:
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: {key} must be a list of non-empty strings")
    return value


def _hex_digest(value: str, where: str) -> bytes:
    try:
        digest = bytes.fromhex(value)
    except ValueError:
        digest = b""
    if len(digest) != hashlib.sha256().digest_size:
        raise ConfigError(f"{where}: token_sha256 entries are 64 hex characters (SHA-256)")
    return digest


def _file_digests(
    paths: Sequence[str], where: str, unreadable: UnreadableToken | None
) -> tuple[bytes, ...]:
    digests = []
    for path in paths:
        try:
            digests.append(token_digest(_read_token(path, where)))
        except ConfigError as exc:
            if unreadable is None:
                raise
            unreadable(where, path, str(exc))
    return tuple(digests)


def _read_token(path: str, where: str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read token file {path}: {exc.strerror}") from None
    if len(token) < 16:
        raise ConfigError(f"{where}: token in {path} is shorter than 16 characters")
    return token


def load_callers_text(
    text: str, origin: str, unreadable: UnreadableToken | None = None
) -> CallerRegistry:
    """Parse JSON (a list of callers, or {"caller": [...]}) or TOML."""
    data: Any = None
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError:
            data = None  # "[[caller]]" is TOML
    try:
        data = tomllib.loads(text) if data is None else data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML or JSON: {exc}") from None
    return parse_callers({"caller": data} if isinstance(data, list) else data, origin, unreadable)


def method_roles(service: str, roles: Mapping[str, Role]) -> dict[str, Role]:
    """{"Upsert": WRITER} for service "rag.indexer.v1.Indexer" → full method paths."""
    return {f"/{service}/{name}": role for name, role in roles.items()}
