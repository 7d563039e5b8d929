"""Paging through one fused ranking: `page_token` in, `next_page_token` out.

A page token lets the same request fetch the next hits of the *same*
ranking, never a duplicate or a gap, while the index is unchanged. Nothing
is kept on the server; the token carries what makes the ranking
reproducible:

- the index generation the first page was served from (said in the refusal
  when the ranking changed since);
- a fingerprint of every request field that shapes the ranking (query,
  filters, weights, caps, channels, ...), so a token cannot continue a
  different question; `top_k`, `debug` and the evidence budget may change
  from page to page;
- a fingerprint of the fused candidate list, each candidate as its id and
  the generation of the run that last wrote its row, so a page whose
  channels answered differently (a timeout, say), or whose candidates were
  rewritten or reordered by a commit since, is refused instead of silently
  skipping or repeating hits. A commit that touched none of them (another
  scope's run, another document's) leaves the ranking, and the token, valid:
  a busy multi-tenant index would otherwise expire every reader's pages with
  each tenant's ingest;
- how far the caller has read (hits, or documents when grouping);
- the reranked prefix, as positions in the fused list with their scores:
  reranking runs under a deadline and may score a different prefix on a
  later call, so later pages restore the first page's order instead of
  asking the Reranker again.

Tokens are opaque URL-safe text; they are not secrets (they hold no text or
ids, and every filter and scope check applies to each page as to the first),
but they are signed (services.retriever.page_keys): a token that does not
verify is refused before any field is read, and every field of one that
does is range-checked before use (`PageToken.check`, and `restore` against
the fused list), so even a token signed by a leaked key is refused with
INVALID_ARGUMENT naming `page_token`, never an internal error.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

from services.core.errors import FailedPrecondition, InvalidArgument, Unavailable
from services.retriever.page_keys import TAG_BYTES, PageTokenKeys
from services.retriever.requests import RetrievalRequest
from services.retriever.types import FusedHit

_VERSION = 2  # 2: signed (1 was not)
# version, generation + 1, request, ranking, offset, boost origin (unix s), n
_HEAD = struct.Struct(">BQ8s8sIqH")
_ENTRY = struct.Struct(">Hf")  # position in the fused list, rerank score
MAX_TOKEN_CHARS = 2048
# As many reranked positions as a token of MAX_TOKEN_CHARS holds (246), a
# little under: more than RAG_RERANK_CANDIDATES may be (200).
MAX_RERANKED_ENTRIES = 240
# The first page's time: 2000-01-01 .. 2200-01-01 UTC (0: none carried).
MIN_ORIGIN_S, MAX_ORIGIN_S = 946_684_800, 7_258_118_400
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]*")
_NOT_OURS = "page_token: not a token this service issued"


@dataclass(frozen=True)
class PageToken:
    generation: int | None  # the committed generation served (None: every row)
    request: bytes  # fingerprint of the ranking-shaping request fields
    ranking: bytes  # fingerprint of the fused candidates (id, row generation), in order
    offset: int  # hits (or documents when grouping) already returned
    reranked: tuple[tuple[int, float], ...] = ()  # fused position, score; rerank order
    origin: int = 0  # the first page's time (unix seconds): recency ages count from it

    def encode(self, keys: PageTokenKeys) -> str:
        generation = 0 if self.generation is None else self.generation + 1
        head = _HEAD.pack(
            _VERSION,
            generation,
            self.request,
            self.ranking,
            self.offset,
            self.origin,
            len(self.reranked),
        )
        body = head + b"".join(_ENTRY.pack(p, score) for p, score in self.reranked)
        return base64.urlsafe_b64encode(body + keys.sign(body)).decode().rstrip("=")

    def check(self) -> PageToken:
        """This token, if every field is within what this service issues."""
        if self.offset < 1:
            raise InvalidArgument(f"page_token: offset {self.offset}, a next page starts at 1")
        if self.origin and not MIN_ORIGIN_S <= self.origin <= MAX_ORIGIN_S:
            raise InvalidArgument(
                f"page_token: origin {self.origin} is outside {MIN_ORIGIN_S}..{MAX_ORIGIN_S} "
                "(2000..2200)"
            )
        if len(self.reranked) > MAX_RERANKED_ENTRIES:
            raise InvalidArgument(
                f"page_token: {len(self.reranked)} reranked entries, limit is "
                f"{MAX_RERANKED_ENTRIES}"
            )
        seen: set[int] = set()
        for index, (position, score) in enumerate(self.reranked):
            if not math.isfinite(score):
                raise InvalidArgument(f"page_token: reranked[{index}] score is not finite")
            if position in seen:
                raise InvalidArgument(f"page_token: reranked[{index}] repeats position {position}")
            seen.add(position)
        return self


def decode_token(text: str, keys: PageTokenKeys) -> PageToken:
    """The token a caller sent back: InvalidArgument if it is not one of ours
    or a field is out of range; FailedPrecondition if its key has retired."""
    raw = _raw(text)
    body, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
    keys.verify(body, tag)
    _, generation, request, ranking, offset, origin, count = _HEAD.unpack_from(body)
    if len(body) != _HEAD.size + count * _ENTRY.size:
        raise InvalidArgument(f"{_NOT_OURS} (its length does not match its entries)")
    entries = tuple(_ENTRY.iter_unpack(body[_HEAD.size :]))
    generation = None if generation == 0 else generation - 1
    return PageToken(generation, request, ranking, offset, entries, origin).check()


def _raw(text: str) -> bytes:
    """The token's bytes, if it is URL-safe base64 of a version-2 token's size."""
    if len(text) > MAX_TOKEN_CHARS:
        raise InvalidArgument(f"page_token: {len(text)} characters, limit is {MAX_TOKEN_CHARS}")
    if not _URL_SAFE.fullmatch(text) or len(text) % 4 == 1:
        raise InvalidArgument(f"{_NOT_OURS} (not URL-safe base64)")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) < _HEAD.size + TAG_BYTES or raw[0] != _VERSION:
        raise InvalidArgument(f"{_NOT_OURS} (unknown version or too short)")
    return raw


def unverified_generation(text: str) -> int | None:
    """The index generation a token names, read without checking its
    signature: for tests and diagnostics that hold no key, never for serving."""
    generation = int(_HEAD.unpack_from(_raw(text))[1])
    return None if generation == 0 else generation - 1


def request_fingerprint(request: RetrievalRequest) -> bytes:
    """What must be equal for two requests to share one ranking."""
    shaping = asdict(replace(request, top_k=0, debug=False, context_char_budget=0, page_token=""))
    shaping["channels"] = sorted(shaping["channels"])
    shaping["weights"] = sorted((shaping["weights"] or {}).items())
    return _digest(json.dumps(shaping, sort_keys=True, default=str))


def ranking_fingerprint(candidates: Sequence[FusedHit]) -> bytes:
    """The fused list as ids in order, each with the generation of its row:
    chunk ids are positions (`services.indexer.identity`), so an edited chunk
    keeps its id, but its row carries the run that rewrote it."""
    rows = (f"{hit.chunk.chunk_id}\t{hit.chunk.generation}" for hit in candidates)
    return _digest("\n".join(rows))


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


@dataclass(frozen=True)
class Ranking:
    """What a next page's token keeps of one request's ranking."""

    candidates: Sequence[FusedHit]  # as fused: the token fingerprints them
    reranked: Sequence[FusedHit]  # the rerank step's order: the token keeps its scored hits
    origin: datetime  # when recency ages count from
    generation: int | None  # the index generation it was served from


@dataclass(frozen=True)
class PageCursor:
    """Where a request starts reading: the first page, or a checked token;
    with the request's fingerprint, taken once per request (`of`)."""

    token: PageToken | None = None
    request: bytes = b""  # request_fingerprint of the request (b"": not taken)

    @classmethod
    def of(cls, request: RetrievalRequest, keys: PageTokenKeys) -> PageCursor:
        """The request's place in its ranking; InvalidArgument for a token
        that is malformed, forged or continues another request."""
        fingerprint = request_fingerprint(request)
        if not request.page_token:
            return cls(request=fingerprint)
        token = decode_token(request.page_token, keys)
        if token.request != fingerprint:
            raise InvalidArgument(
                "page_token: issued for a different request (between pages only "
                "top_k, debug and context_char_budget may change)"
            )
        return cls(token, fingerprint)

    def next_token(
        self, request: RetrievalRequest, ranking: Ranking, offset: int, keys: PageTokenKeys
    ) -> str:
        """The signed token that continues `ranking` at `offset`, with the
        fingerprints this request already took: the request's (`of`), and
        the token's ranking, which `restore` found equal to the candidates'."""
        fingerprints = (
            self.request or request_fingerprint(request),
            self.token.ranking if self.token else ranking_fingerprint(ranking.candidates),
        )
        reranked = (
            self.token.reranked
            if self.token
            else reranked_positions(ranking.candidates, ranking.reranked)
        )
        generation, origin = ranking.generation, ranking.origin
        return _signed(request, generation, fingerprints, reranked, offset, origin, keys)

    @property
    def offset(self) -> int:
        return self.token.offset if self.token else 0

    def origin(self, now: datetime) -> datetime:
        """When recency ages count from: the first page's time on every page."""
        if self.token is None or not self.token.origin:
            return now.replace(microsecond=0)
        return datetime.fromtimestamp(self.token.origin, tz=UTC)

    def restore(
        self, candidates: list[FusedHit], degraded: Sequence[str], generation: int | None = None
    ) -> list[FusedHit]:
        """The first page's order of `candidates` (the reranked prefix with its
        scores, then fused order), or an error if they are not the same list.
        `generation`: the one this page is served from, named in the refusal."""
        assert self.token is not None
        if self.token.ranking != ranking_fingerprint(candidates):
            if degraded:
                raise Unavailable(
                    f"page_token: this page's ranking could not be rebuilt "
                    f"({', '.join(degraded)}); retry the same request"
                )
            raise FailedPrecondition(f"page_token: {self._changed(generation)}; start again")
        _check_within(self.token, len(candidates))
        return _reorder(candidates, self.token.reranked)

    def _changed(self, generation: int | None) -> str:
        assert self.token is not None
        issued = self.token.generation
        if generation is None or issued is None or issued == generation:
            return "the ranking changed since the first page"
        return (
            f"the ranking changed since the first page (issued at index generation "
            f"{issued}, now serving {generation})"
        )


def _check_within(token: PageToken, candidates: int) -> None:
    """The token's offset and positions lie within the fused list."""
    if token.offset > candidates:
        raise InvalidArgument(
            f"page_token: offset {token.offset} is past the {candidates} candidates"
        )
    for index, (position, _) in enumerate(token.reranked):
        if position >= candidates:
            raise InvalidArgument(
                f"page_token: reranked[{index}] position {position} is past the "
                f"{candidates} candidates"
            )


def _reorder(candidates: list[FusedHit], reranked: Sequence[tuple[int, float]]) -> list[FusedHit]:
    """The first page's order again: the reranked hits, in their final order,
    fill the places they held in the fused list; every other hit keeps its
    own (as `fusion.place_reranked` placed them: a reranker that read only
    some candidates, by language or by deadline, moved only those)."""
    restored = list(candidates)
    places = sorted(position for position, _ in reranked)
    for place, (position, score) in zip(places, reranked, strict=True):
        restored[place] = replace(candidates[position], rerank_score=float(score))
    return restored


def reranked_positions(
    candidates: Sequence[FusedHit], ranked: Sequence[FusedHit]
) -> tuple[tuple[int, float], ...]:
    """The reranked hits of `ranked`, as positions in `candidates`, in order."""
    where = {hit.chunk.chunk_id: i for i, hit in enumerate(candidates)}
    return tuple(
        (where[hit.chunk.chunk_id], hit.rerank_score)
        for hit in ranked[:MAX_RERANKED_ENTRIES]
        if hit.rerank_score is not None
    )


def next_page_token(
    request: RetrievalRequest,
    generation: int | None,
    candidates: Sequence[FusedHit],
    reranked: tuple[tuple[int, float], ...],
    offset: int,
    origin: datetime,
    keys: PageTokenKeys,
) -> str:
    """The token that continues this ranking at `offset`, signed (both
    fingerprints taken here)."""
    fingerprints = (request_fingerprint(request), ranking_fingerprint(candidates))
    return _signed(request, generation, fingerprints, reranked, offset, origin, keys)


def _signed(
    request: RetrievalRequest,
    generation: int | None,
    fingerprints: tuple[bytes, bytes],
    reranked: tuple[tuple[int, float], ...],
    offset: int,
    origin: datetime,
    keys: PageTokenKeys,
) -> str:
    # A request with its own recency origin keeps it on every page (it may lie
    # outside the bounds a carried origin is checked against): none carried.
    origin_s = 0 if request.boosts.recency_origin() else int(origin.timestamp())
    token = PageToken(generation, *fingerprints, offset, reranked, origin_s)
    return token.encode(keys)
