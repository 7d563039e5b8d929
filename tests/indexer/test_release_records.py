"""RecordRelease's logic on a real SQLite manifest: the record must be a JSON
object, the generation must be committed, and the verdict is readable back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, InvalidArgument
from services.indexer.release_records import record_release
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.visibility import (
    COMMITTED_GENERATION_META,
    ReleaseVerdict,
    read_release,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def manifest(tmp_path: Path) -> Iterator[SqliteManifest]:
    m = SqliteManifest(tmp_path / "manifest.sqlite")
    m.set_meta(COMMITTED_GENERATION_META, "3", unrequested_deadline())
    yield m
    m.close()


def request(
    record: str = '{"passed": true}', passed: bool = True, generation: int = 3
) -> pb.RecordReleaseRequest:
    return pb.RecordReleaseRequest(record_json=record, passed=passed, generation=generation)


@pytest.mark.parametrize(
    ("record", "generation", "words"),
    [
        ("", 3, "record_json: is empty"),
        ("{broken", 3, "record_json: not valid JSON"),
        ("[1]", 3, "record_json: must be a JSON object"),
        ('{"a": NaN}', 3, r"record_json: not valid JSON \(NaN is not a JSON value"),
        ('{"a": [-Infinity]}', 3, "record_json: not valid JSON \\(-Infinity is not"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", 3, "record_json: nests"),
        ('{"a": 1}', 4, "generation: 4 is above the committed generation 3"),
        ('{"a": 1}', -1, "generation: must not be negative"),
    ],
)
def test_invalid_requests_name_the_field_and_store_nothing(
    manifest: SqliteManifest, record: str, generation: int, words: str
) -> None:
    with pytest.raises(InvalidArgument, match=words):
        record_release(manifest, request(record, generation=generation), unrequested_deadline())
    assert read_release(manifest, unrequested_deadline()) is None


def test_latest_verdict_is_stored_with_its_record(manifest: SqliteManifest) -> None:
    reply = record_release(
        manifest,
        request('{"passed": true, "checks": ["ok"]}'),
        unrequested_deadline(),
        now=lambda: "2030-01-02T03:04:05Z",
    )
    assert reply.committed_generation == 3
    assert read_release(manifest, unrequested_deadline()) == ReleaseVerdict(
        3, True, "2030-01-02T03:04:05Z"
    )
    # An older generation may be recorded (a check of what was served), and a
    # failed check replaces a passing one: only the latest verdict counts.
    record_release(manifest, request("{}", passed=False, generation=2), unrequested_deadline())
    verdict = read_release(manifest, unrequested_deadline())
    assert verdict is not None and (verdict.generation, verdict.passed) == (2, False)
    assert not verdict.covers(3)
    stored = json.loads(manifest.get_meta("release", deadline=unrequested_deadline()) or "{}")
    assert stored["record"] == {}


def test_a_passed_deadline_stores_nothing(manifest: SqliteManifest) -> None:
    with pytest.raises(DeadlineExceeded):
        record_release(manifest, request('{"a": 1}'), Deadline.after(-1.0))
    assert read_release(manifest, unrequested_deadline()) is None


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ('{"passed": false, "failures": ["golden: 0/4"]}', "record_json.passed is not true"),
        ('{"failures": []}', "record_json.passed is not true"),
        ('{"passed": "true"}', "record_json.passed is not true"),
        ('{"passed": true, "generation": {"at_start": 2}}', "the record judged generation 2"),
    ],
)
def test_a_passing_verdict_must_be_the_records_own(
    manifest: SqliteManifest, record: str, words: str
) -> None:
    # Probe: passed=True with a failing record opened the public entry.
    with pytest.raises(InvalidArgument, match=words):
        record_release(manifest, request(record, passed=True), unrequested_deadline())
    assert read_release(manifest, unrequested_deadline()) is None
    # A failing verdict is stored whatever its record says: closing is safe.
    record_release(manifest, request(record, passed=False), unrequested_deadline())
    stored = read_release(manifest, unrequested_deadline())
    assert stored is not None and not stored.passed
