"""The embedded manifest (SQLite) refuses a damaged file with one clear line
naming it, as the vector and lexical stores do, instead of a traceback from
deep inside start-up (probe 3: a manifest cut to half its size)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.manifest import ManifestEntry

pytestmark = pytest.mark.unit


def test_a_truncated_manifest_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "manifest.sqlite3"
    manifest = SqliteManifest(path)
    assert manifest.get("doc", "en", unrequested_deadline()) is None
    manifest.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match=r"cannot open manifest .*manifest\.sqlite3"):
        SqliteManifest(path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "manifest.sqlite3"
    path.write_bytes(b"not a database at all\n" * 200)
    with pytest.raises(ConfigError, match="cannot open manifest"):
        SqliteManifest(path)


def _entries(count: int, locale: str, scope_id: str) -> list[ManifestEntry]:
    return [
        ManifestEntry(f"{scope_id}-{locale}-{n}", locale, scope_id, "c", "m", ("x#0",), ("h",))
        for n in range(count)
    ]


def _vm_steps(manifest: SqliteManifest, read: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions a read executes, in hundreds."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    manifest._db.set_progress_handler(count, 100)
    try:
        read()
    finally:
        manifest._db.set_progress_handler(None, 0)
    return steps[0]


def test_the_locales_of_a_scope_are_found_without_reading_every_document(
    tmp_path: Path,
) -> None:
    manifest = SqliteManifest(tmp_path / "manifest.sqlite3")
    rows = _entries(4000, "en", "api") + _entries(3, "zh-CN", "site") + _entries(2, "en", "site")
    empty = ManifestEntry("draft", "ja", "site", "c", "m", (), ())  # nothing to search in
    manifest.put_many([*rows, empty], unrequested_deadline())
    ample = unrequested_deadline()
    scan = "SELECT DISTINCT locale FROM documents WHERE chunk_ids != '[]' ORDER BY locale"
    every_row = _vm_steps(manifest, lambda: manifest._db.execute(scan).fetchall())
    assert manifest.locales_in([], [], ample) == ["en", "zh-CN"]
    assert manifest.locales_in(["api"], [], ample) == ["en"]
    assert manifest.locales_in(["site", "api", "site"], [], ample) == ["en", "zh-CN"]
    # A long doc_ids filter is bound once, though the statement names it twice.
    many = [f"missing-{n}" for n in range(20_000)] + ["site-zh-CN-0"]
    assert manifest.locales_in(["site"], many, ample) == ["zh-CN"]
    # One index seek per locale found, not a pass over 4,000 documents.
    assert every_row > 100
    for scopes in ([], ["api"], ["site", "api"]):
        assert _vm_steps(manifest, lambda s=scopes: manifest.locales_in(s, [], ample)) < 5
    manifest.close()


def test_a_manifest_written_before_the_locale_indexes_gets_them_on_open(tmp_path: Path) -> None:
    path = tmp_path / "manifest.sqlite3"
    manifest = SqliteManifest(path)
    manifest.put_many(_entries(3, "zh-CN", "site"), unrequested_deadline())
    manifest.close()
    with closing(sqlite3.connect(path)) as db:  # as an older release left it
        db.execute("DROP INDEX documents_live_locales")
        db.execute("DROP INDEX documents_scope_live_locales")
        db.commit()
    manifest = SqliteManifest(path)
    names = {r[0] for r in manifest._db.execute("SELECT name FROM sqlite_master")}
    assert {"documents_live_locales", "documents_scope_live_locales"} <= names
    assert manifest.locales_in(["site"], [], unrequested_deadline()) == ["zh-CN"]
    manifest.close()
