"""The release gate: with `RAG_GATEWAY_REQUIRE_RELEASE`, searches are served
only while the Retriever reports a passing release check for the index
generation it serves.

Why here and not only in the release process: an ingest after the check
changes the index the public sees; the gate closes by itself until the new
generation is checked, so "checked before opened" holds for every generation,
not just the first. The Retriever's answer is cached for `ttl_s` (one call
per instance every couple of seconds, whatever the traffic) and asked under a
deadline; an answer that does not come counts as closed (fail closed). A
Retriever that cannot be reached is said as such (502 `upstream_unavailable`,
504 `upstream_timeout`, as a search would get): "release not current" would
send an operator to re-run a release check the index may well have passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from gateway.cached import CachedAnswer
from gateway.errors import ApiError, ErrorCode
from gateway.retriever_client import RetrieverClient
from rag_client import CallError
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

STATUS_TTL_S = 2.0
# A status call that failed for these reasons never reached an answer: the
# gate is closed because the Retriever is out of reach, not because of a check.
UNREACHED: Mapping[grpc.StatusCode, ErrorCode] = {
    grpc.StatusCode.UNAVAILABLE: ErrorCode.UPSTREAM_UNAVAILABLE,
    grpc.StatusCode.CANCELLED: ErrorCode.UPSTREAM_UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.UPSTREAM_UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorCode.UPSTREAM_TIMEOUT,
}


@dataclass(frozen=True)
class ReleaseState:
    required: bool
    current: bool
    reason: str = ""
    # What a search is refused with while closed.
    error: ErrorCode = ErrorCode.RELEASE_NOT_CURRENT

    @property
    def open(self) -> bool:
        return not self.required or self.current

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"required": self.required}
        if self.required:
            body.update(current=self.current, reason=self.reason)
        return body


def state_of(status: pb.IndexStatusResponse) -> ReleaseState:
    """Why the gate is closed, in words an operator can act on."""
    served = status.committed_generation
    if status.release_current:
        return ReleaseState(True, True)
    if not status.release_recorded:
        reason = f"no passing release check for index generation {served}"
    elif not status.release_passed:
        reason = f"latest release check failed (generation {status.release_generation})"
    elif status.release_generation != served:
        reason = f"release check is for generation {status.release_generation}, serving {served}"
    else:
        reason = f"no passing release check for index generation {served}"
    return ReleaseState(True, False, reason)


class ReleaseGate:
    def __init__(
        self,
        retriever: RetrieverClient,
        required: bool,
        timeout_s: float,
        ttl_s: float = STATUS_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retriever, self.required = retriever, required
        self.timeout_s = timeout_s
        self._state = CachedAnswer(self._ask, ttl_s, clock)

    async def state(self) -> ReleaseState:
        if not self.required:
            return ReleaseState(False, True)
        return await self._state.get()

    async def check(self) -> None:
        """Raise what a search gets while the gate is closed: 503, or the
        upstream error when the Retriever could not be asked."""
        state = await self.state()
        if not state.open:
            raise ApiError(state.error, state.reason)

    async def _ask(self) -> ReleaseState:
        try:
            status = await self.retriever.index_status(self.timeout_s)
        except CallError as exc:
            reason = f"index status unavailable: {exc.code.name}"
            error = UNREACHED.get(exc.code, ErrorCode.RELEASE_NOT_CURRENT)
            return ReleaseState(True, False, reason, error)
        return state_of(status)
