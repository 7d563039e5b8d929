"""The Indexer's side of `RecordRelease`: keep a release check's verdict with
the index it judged.

Why in the manifest: the verdict belongs to an index generation, and the
manifest is where that generation is committed, so the Retriever (and through
it the Gateway) reads both from one place and can tell whether the generation
it serves is the one that passed. Only the latest record is kept; the full
history lives in the check's own files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.deadline import Deadline
from services.core.errors import InvalidArgument
from services.storage.manifest import Manifest
from services.storage.visibility import ReleaseVerdict, committed_generation, write_release

MAX_RECORD_CHARS = 4_000_000  # a record of thousands of golden queries fits


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def record_release(
    manifest: Manifest,
    request: pb.RecordReleaseRequest,
    deadline: Deadline,
    now: Callable[[], str] = utc_now,
) -> pb.RecordReleaseResponse:
    """Validate and store the verdict within `deadline` (the read and the
    write); call under the Indexer's write lock, so no run can commit between
    reading the committed generation and writing."""
    record = _check_record_json(request.record_json)
    if request.generation < 0:
        raise InvalidArgument(f"generation: must not be negative, got {request.generation}")
    committed = committed_generation(manifest, deadline)
    if request.generation > committed:
        raise InvalidArgument(
            f"generation: {request.generation} is above the committed generation {committed}; "
            "a release check can only judge an index that was committed"
        )
    _check_verdict_is_the_records(record, request)
    verdict = ReleaseVerdict(request.generation, request.passed, now())
    write_release(manifest, verdict, request.record_json, deadline)
    return pb.RecordReleaseResponse(committed_generation=committed)


def _not_json(name: str) -> object:
    """Python's json reads NaN and ±Infinity; RFC 8259 has no such values and
    other readers of the record (jq, a browser) refuse them."""
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


def _check_verdict_is_the_records(
    record: dict[str, object], request: pb.RecordReleaseRequest
) -> None:
    """A passing verdict opens the public entry, so it must be the record's own
    (`passed` true, and the generation the record names, if it names one). A
    failing one is stored as sent: closing the entry is always safe."""
    if not request.passed:
        return
    if record.get("passed") is not True:
        raise InvalidArgument(
            "passed: true, but record_json.passed is not true (a passing verdict must be "
            "the record's own)"
        )
    judged = record.get("generation")
    at_start = judged.get("at_start") if isinstance(judged, dict) else None
    if at_start is not None and at_start != request.generation:
        raise InvalidArgument(
            f"generation: {request.generation}, but the record judged generation {at_start}"
        )


def _check_record_json(record_json: str) -> dict[str, object]:
    if not record_json.strip():
        raise InvalidArgument("record_json: is empty; send the release record as JSON")
    if len(record_json) > MAX_RECORD_CHARS:
        raise InvalidArgument(
            f"record_json: {len(record_json)} characters exceed the limit of {MAX_RECORD_CHARS}"
        )
    try:
        value = json.loads(record_json, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"record_json: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:  # `[[[…` deeper than the decoder recurses, once INTERNAL
        raise InvalidArgument("record_json: nests arrays and objects too deeply") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"record_json: must be a JSON object, not {type(value).__name__}")
    return value
