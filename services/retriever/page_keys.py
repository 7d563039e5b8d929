"""The keys that sign page tokens (services.retriever.paging).

A page token is signed with HMAC-SHA256 under a server key (the first 16 bytes
of the tag travel with the token), so a caller cannot change any field of it:
a token that does not verify is refused before any field is read.

- `RAG_PAGE_TOKEN_KEY` signs new tokens and verifies them. Every Retriever
  replica behind one gateway or load balancer needs the same key, or a next
  page served by another replica is refused.
- Rotation: move the old key to `RAG_PAGE_TOKEN_PREVIOUS_KEY` and set
  `RAG_PAGE_TOKEN_PREVIOUS_KEY_UNTIL` to an RFC 3339 time; tokens signed with
  it are still accepted until then, refused after (FAILED_PRECONDITION, as a
  page token whose ranking is gone: the caller starts again from the first
  page). An absolute time rather than a grace period, so that replicas
  restarted at different times still agree on when the old key retires.
- No key configured: a random key per process, with a warning at start-up.
  The quick start works with no configuration, but its tokens do not survive
  a restart and are not accepted by another replica.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from pydantic import SecretStr

from services.core.errors import FailedPrecondition, InvalidArgument
from services.core.logging import get_logger

log = get_logger(__name__)


class PageKeySettings(Protocol):
    """What the keys are made from: RetrieverSettings has these fields (it
    validates them, with MIN_KEY_CHARS from here; named structurally so that
    this module does not import the settings that import it)."""

    @property
    def page_token_key(self) -> SecretStr | None: ...
    @property
    def page_token_previous_key(self) -> SecretStr | None: ...
    @property
    def page_token_previous_key_until(self) -> datetime | None: ...


TAG_BYTES = 16  # 128 bits of HMAC-SHA256: forging one is a 2**128 guess
MIN_KEY_CHARS = 32
# Binds the tag to this use of the key: the same secret reused elsewhere
# cannot produce a valid page token.
_DOMAIN = b"rag.retriever.page_token\0"
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _tag(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, _DOMAIN + body, hashlib.sha256).digest()[:TAG_BYTES]


@dataclass(frozen=True)
class PageTokenKeys:
    """The current key, and the previous one with the time it retires."""

    current: bytes = field(repr=False)
    previous: bytes | None = field(default=None, repr=False)
    previous_until: datetime | None = None
    clock: Clock = field(default=_utc_now, compare=False)

    @classmethod
    def random(cls) -> PageTokenKeys:
        """A key of this process alone (tests, and the zero-config start)."""
        return cls(secrets.token_bytes(32))

    @classmethod
    def from_settings(cls, settings: PageKeySettings) -> PageTokenKeys:
        if settings.page_token_key is None:
            log.warning(
                "page_token_key_random",
                reason="RAG_PAGE_TOKEN_KEY is not set: page tokens are signed with a random "
                "key of this process; they stop working when it restarts and are refused by "
                "other Retriever replicas",
            )
            return cls.random()
        previous = settings.page_token_previous_key
        return cls(
            settings.page_token_key.get_secret_value().encode(),
            previous.get_secret_value().encode() if previous is not None else None,
            settings.page_token_previous_key_until,
        )

    def sign(self, body: bytes) -> bytes:
        return _tag(self.current, body)

    def verify(self, body: bytes, tag: bytes) -> None:
        """Returns if `tag` is `body`'s under a key in force; raises otherwise."""
        if hmac.compare_digest(_tag(self.current, body), tag):
            return
        if self.previous is not None and hmac.compare_digest(_tag(self.previous, body), tag):
            until = self.previous_until
            if until is not None and self.clock() < until:
                return
            raise FailedPrecondition(
                f"page_token: signed with a key retired at {until.isoformat() if until else '?'}; "
                "start again without a page token"
            )
        raise InvalidArgument("page_token: not a token this service issued (bad signature)")
