"""Signed page tokens (services.retriever.paging, page_keys): every field of a
token is checked before use, a token signed by no key in force is refused,
and a rotated-out key verifies until its retirement time, not after."""

from __future__ import annotations

import base64
import struct
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from services.core.errors import FailedPrecondition, InvalidArgument
from services.retriever.boosts import Boosts, RecencyBoost
from services.retriever.page_keys import TAG_BYTES, PageTokenKeys
from services.retriever.paging import (
    MAX_RERANKED_ENTRIES,
    MAX_TOKEN_CHARS,
    PageCursor,
    PageToken,
    decode_token,
    next_page_token,
    ranking_fingerprint,
    request_fingerprint,
)
from services.retriever.requests import RetrievalRequest
from services.retriever.settings import RetrieverSettings
from tests.retriever.factories import hit

pytestmark = pytest.mark.unit

REQUEST = RetrievalRequest(query="how do I restore a backup", top_k=3)
KEYS = PageTokenKeys(b"current-key-" * 3)
FUSED = [hit(f"c{i}", 1.0 / (i + 1)) for i in range(6)]
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def _token(**fields: Any) -> PageToken:
    base = PageToken(4, request_fingerprint(REQUEST), ranking_fingerprint(FUSED), 3, ((2, 0.5),))
    return replace(base, **fields)


def _refusal(token: PageToken, keys: PageTokenKeys = KEYS) -> str:
    """Why the Retriever refuses `token` (signed with `keys`), up to restoring its order."""
    with pytest.raises(InvalidArgument) as refused:
        request = replace(REQUEST, page_token=token.encode(keys))
        PageCursor.of(request, KEYS).restore(FUSED, degraded=[])
    return str(refused.value)


# Finding 1 (issue 37): these origins made `datetime.fromtimestamp` raise (INTERNAL).
@pytest.mark.parametrize("origin", [2**62, -(2**62), 253402300800, -62135596801, 1, 2**31 * 4])
def test_an_origin_outside_2000_to_2200_is_refused_naming_it(origin: int) -> None:
    assert _refusal(_token(origin=origin)).startswith(f"page_token: origin {origin} is outside")


def test_an_origin_within_bounds_is_the_first_pages_time() -> None:
    first_page = int(NOW.timestamp())
    token = _token(origin=first_page).encode(KEYS)
    cursor = PageCursor.of(replace(REQUEST, page_token=token), KEYS)
    assert cursor.origin(NOW + timedelta(hours=1)) == NOW


# Finding 2 (issue 37): NaN/inf scores and repeated positions answered OK,
# with duplicate chunks and non-finite rerank scores.
@pytest.mark.parametrize(
    ("reranked", "reason"),
    [
        (((0, float("nan")),), "page_token: reranked[0] score is not finite"),
        (((0, 1.0), (1, float("inf"))), "page_token: reranked[1] score is not finite"),
        (((1, -float("inf")),), "page_token: reranked[0] score is not finite"),
        (((0, 1.0), (0, 0.5)), "page_token: reranked[1] repeats position 0"),
        (((3, 1.0), (6, 0.5)), "page_token: reranked[1] position 6 is past the 6 candidates"),
        (((65535, 1.0),), "page_token: reranked[0] position 65535 is past the 6 candidates"),
    ],
)
def test_forged_rerank_entries_are_refused_naming_them(
    reranked: tuple[tuple[int, float], ...], reason: str
) -> None:
    assert _refusal(_token(reranked=reranked)) == reason


@pytest.mark.parametrize(
    ("offset", "reason"),
    [(0, "page_token: offset 0, a next page starts at 1"), (7, "offset 7 is past the 6")],
)
def test_an_offset_outside_the_fused_list_is_refused(offset: int, reason: str) -> None:
    assert reason in _refusal(_token(offset=offset))


def test_too_many_entries_are_refused_and_the_most_fit_the_token_limit() -> None:
    most = tuple((i, 0.5) for i in range(MAX_RERANKED_ENTRIES))
    assert len(_token(reranked=most).encode(KEYS)) <= MAX_TOKEN_CHARS
    too_many = (*most, (MAX_RERANKED_ENTRIES, 0.5))
    assert "reranked entries, limit is" in _refusal(_token(reranked=too_many))


def _resigned(token: str, edit: slice, value: bytes, keys: PageTokenKeys | None) -> str:
    """`token` with bytes `edit` replaced; signed again with `keys` (None: the old tag kept)."""
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[edit] = value
    body = bytes(raw[:-TAG_BYTES])
    tag = keys.sign(body) if keys else bytes(raw[-TAG_BYTES:])
    return base64.urlsafe_b64encode(body + tag).decode().rstrip("=")


def test_any_changed_byte_without_the_key_is_a_bad_signature() -> None:
    token = _token().encode(KEYS)
    origin = slice(29, 37)  # the header's int64 first-page time
    for forged in (
        _resigned(token, origin, struct.pack(">q", 2**62), None),
        _resigned(token, slice(25, 29), struct.pack(">I", 1), None),
        _resigned(token, slice(-1, None), b"\0", None),
        _resigned(token, origin, struct.pack(">q", 2**62), PageTokenKeys(b"x" * 32)),
    ):
        with pytest.raises(InvalidArgument, match=r"^page_token: .*bad signature"):
            decode_token(forged, KEYS)
    # The same edit signed with the service's key gets past the signature to the field check.
    signed = _resigned(token, origin, struct.pack(">q", 2**62), KEYS)
    with pytest.raises(InvalidArgument, match="origin 4611686018427387904 is outside"):
        decode_token(signed, KEYS)


def test_a_count_that_disagrees_with_the_length_is_refused() -> None:
    token = _token().encode(KEYS)
    forged = _resigned(token, slice(37, 39), struct.pack(">H", 2), KEYS)
    with pytest.raises(InvalidArgument, match="length does not match"):
        decode_token(forged, KEYS)


def test_a_retired_key_verifies_until_its_time_and_is_refused_after() -> None:
    old, new = b"old-key-" * 4, b"new-key-" * 4
    clock = [NOW]
    rotated = PageTokenKeys(new, old, NOW + timedelta(hours=1), clock=lambda: clock[0])
    issued_before = _token().encode(PageTokenKeys(old))
    assert decode_token(issued_before, rotated) == _token()
    assert decode_token(_token().encode(rotated), rotated) == _token()  # signed with the new key
    clock[0] = NOW + timedelta(hours=1)
    with pytest.raises(FailedPrecondition, match=r"^page_token: signed with a key retired at"):
        decode_token(issued_before, rotated)
    assert decode_token(_token().encode(rotated), rotated) == _token()
    unrotated = PageTokenKeys(new)
    with pytest.raises(InvalidArgument, match="bad signature"):
        decode_token(issued_before, unrotated)


def test_a_requests_own_recency_origin_is_not_carried() -> None:
    """It applies to every page by itself, and may lie outside the carried bounds."""
    ancient = datetime(1900, 1, 1, tzinfo=UTC)
    recency = RecencyBoost(weight=1.0, scale_days=30, origin=ancient)
    request = replace(REQUEST, boosts=Boosts(recency=recency))
    text = next_page_token(request, 4, FUSED, (), 3, ancient, KEYS)
    assert decode_token(text, KEYS).origin == 0
    text = next_page_token(REQUEST, 4, FUSED, (), 3, NOW, KEYS)
    assert decode_token(text, KEYS).origin == int(NOW.timestamp())


# ---------------------------------------------------------------- settings

KEY = "k" * 32


def _settings(**values: Any) -> RetrieverSettings:
    return RetrieverSettings(**values)


def test_keys_come_from_settings_and_a_rotation_needs_its_end() -> None:
    until = "2026-12-01T12:00:00Z"
    settings = _settings(
        page_token_key=KEY, page_token_previous_key="p" * 32, page_token_previous_key_until=until
    )
    keys = PageTokenKeys.from_settings(settings)
    assert (keys.current, keys.previous) == (KEY.encode(), b"p" * 32)
    assert keys.previous_until == datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert KEY not in repr(settings) and KEY not in repr(keys)


OLD, UNTIL = "p" * 32, "2026-12-01T00:00Z"


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"page_token_key": "short"}, "at least 32 characters"),
        ({"page_token_key": KEY, "page_token_previous_key": OLD}, "go together"),
        ({"page_token_previous_key": OLD, "page_token_previous_key_until": UNTIL}, "needs RAG_"),
        (
            {
                "page_token_key": KEY,
                "page_token_previous_key": OLD,
                "page_token_previous_key_until": "2026-12-01T00:00",
            },
            "zone offset",
        ),
        (
            {
                "page_token_key": KEY,
                "page_token_previous_key": KEY,
                "page_token_previous_key_until": UNTIL,
            },
            "equals",
        ),
    ],
)
def test_inconsistent_key_settings_refuse_to_start(values: dict[str, str], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        _settings(**values)


def test_no_key_is_a_random_key_per_process() -> None:
    """The zero-config start: tokens of one process are not accepted by another."""
    settings = _settings(page_token_key="")
    one, other = PageTokenKeys.from_settings(settings), PageTokenKeys.from_settings(settings)
    assert settings.page_token_key is None and one.current != other.current
    with pytest.raises(InvalidArgument, match="bad signature"):
        decode_token(_token().encode(one), other)
