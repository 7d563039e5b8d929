"""The embedded manifest (SQLite) refuses a damaged file with one clear line
naming it, as the vector and lexical stores do, instead of a traceback from
deep inside start-up (probe 3: a manifest cut to half its size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest

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
