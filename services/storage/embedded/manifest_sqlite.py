"""SQLite manifest for embedded mode (one file next to the store folders).

A local file: a call that takes a deadline only checks it before it starts
(`base.call_budget_s`), as the embedded stores do."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from services.core.deadline import Deadline
from services.core.errors import ConfigError
from services.storage.base import call_budget_s
from services.storage.manifest import ManifestEntry, RunIntent, RunState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT NOT NULL,
    locale TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    metadata_hash TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    chunk_hashes TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (doc_id, locale)
);
CREATE INDEX IF NOT EXISTS documents_scope ON documents (scope_id);
CREATE INDEX IF NOT EXISTS documents_live_locales ON documents (locale) WHERE chunk_ids != '[]';
CREATE INDEX IF NOT EXISTS documents_scope_live_locales
    ON documents (scope_id, locale) WHERE chunk_ids != '[]';
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS intents (
    generation INTEGER NOT NULL,
    doc_id TEXT NOT NULL,
    locale TEXT NOT NULL,
    intent TEXT NOT NULL,
    PRIMARY KEY (generation, doc_id, locale)
);
"""
# The distinct locales of the rows matching {where}, by a loose scan of the
# `*_live_locales` indexes: one index seek per locale found, where DISTINCT
# reads every matching document. Measured on the 1M-chunk bench.scale
# manifest (403,780 documents): 120 ms unscoped, paid every few seconds by
# the Retrieve that refreshes its scope's locales (the Retriever's p99 at 1M);
# 0.2 ms this way. {where} must keep the indexes' own `chunk_ids != '[]'`.
_LOCALES_WHERE = """
WITH RECURSIVE found(locale) AS (
    SELECT (SELECT locale FROM documents WHERE {where} ORDER BY locale LIMIT 1)
    UNION ALL
    SELECT (
        SELECT locale FROM documents WHERE {where} AND locale > found.locale
        ORDER BY locale LIMIT 1
    ) FROM found WHERE found.locale IS NOT NULL
)
SELECT locale FROM found WHERE locale IS NOT NULL
"""
# Meta key of the commit point; services.storage.visibility reads it.
_COMMITTED = "committed_generation"


class SqliteManifest:
    """`Manifest` on SQLite (WAL mode; writes are transactions, so a crash
    leaves either the old or the new entries, never a mix)."""

    name = "sqlite manifest"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (
            sqlite3.DatabaseError
        ) as exc:  # a damaged or foreign file: say which, as the stores do
            self._db.close()
            raise ConfigError(f"cannot open manifest {path}: {exc}") from exc

    def get(self, doc_id: str, locale: str, deadline: Deadline) -> ManifestEntry | None:
        return self.get_many([(doc_id, locale)], deadline).get((doc_id, locale))

    def get_many(
        self, keys: Sequence[tuple[str, str]], deadline: Deadline
    ) -> dict[tuple[str, str], ManifestEntry]:
        call_budget_s(self.name, deadline, what="a read")
        found: dict[tuple[str, str], ManifestEntry] = {}
        with self._lock:
            for doc_id, locale in keys:
                row = self._db.execute(
                    "SELECT * FROM documents WHERE doc_id = ? AND locale = ?", (doc_id, locale)
                ).fetchone()
                if row is not None:
                    found[(doc_id, locale)] = _entry(row)
        return found

    def put_many(self, entries: Sequence[ManifestEntry], deadline: Deadline) -> None:
        call_budget_s(self.name, deadline, what="a write")
        with self._lock, self._transaction():
            self._put(entries)

    def _put(self, entries: Sequence[ManifestEntry]) -> None:
        rows = [
            (
                e.doc_id,
                e.locale,
                e.scope_id,
                e.content_hash,
                e.metadata_hash,
                json.dumps(list(e.chunk_ids)),
                json.dumps(list(e.chunk_hashes)),
                e.updated_at,
            )
            for e in entries
        ]
        self._db.executemany(
            "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )

    def delete_many(self, keys: Sequence[tuple[str, str]], deadline: Deadline) -> None:
        call_budget_s(self.name, deadline, what="a delete")
        with self._lock, self._transaction():
            self._db.executemany("DELETE FROM documents WHERE doc_id = ? AND locale = ?", keys)

    def begin_run(self, intents: Sequence[RunIntent], deadline: Deadline) -> None:
        call_budget_s(self.name, deadline, what="recording a run's intents")
        rows = [(i.generation, i.doc_id, i.locale, i.to_json()) for i in intents]
        with self._lock, self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO intents VALUES (?, ?, ?, ?)", rows)

    def open_intents(self, deadline: Deadline) -> list[RunIntent]:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            rows = self._db.execute(
                "SELECT intent FROM intents ORDER BY generation, doc_id, locale"
            ).fetchall()
        return [RunIntent.from_json(r[0]) for r in rows]

    def run_state(self, deadline: Deadline) -> RunState:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock, self._transaction():  # one snapshot of both tables
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (_COMMITTED,)).fetchone()
            rows = self._db.execute(
                "SELECT intent FROM intents ORDER BY generation, doc_id, locale"
            ).fetchall()
        committed = 0 if row is None else int(row[0])
        return RunState(committed, tuple(RunIntent.from_json(r[0]) for r in rows))

    def commit_run(
        self,
        generation: int,
        entries: Sequence[ManifestEntry],
        removed: Sequence[tuple[str, str]],
        deadline: Deadline,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        call_budget_s(self.name, deadline, what="a commit")
        # One transaction: the entries, the commit point and the intents'
        # end are never seen apart.
        with self._lock, self._transaction():
            self._put(entries)
            self._db.executemany(
                "DELETE FROM documents WHERE doc_id = ? AND locale = ?", list(removed)
            )
            values = [*(meta or {}).items(), (_COMMITTED, str(generation))]
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values)
            self._db.execute("DELETE FROM intents WHERE generation = ?", (generation,))

    def clear_intents(self, generation: int, deadline: Deadline) -> None:
        call_budget_s(self.name, deadline, what="clearing a run's intents")
        with self._lock:
            self._db.execute("DELETE FROM intents WHERE generation = ?", (generation,))

    def entries(self) -> Iterable[ManifestEntry]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM documents ORDER BY doc_id, locale").fetchall()
        return [_entry(row) for row in rows]

    def keys_in_scope(self, scope_id: str, deadline: Deadline) -> Iterable[tuple[str, str]]:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id, locale FROM documents WHERE scope_id = ? ORDER BY doc_id, locale",
                (scope_id,),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def locales_of(self, doc_id: str, deadline: Deadline) -> list[str]:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            rows = self._db.execute(
                "SELECT locale FROM documents WHERE doc_id = ? ORDER BY locale", (doc_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def count(self, deadline: Deadline) -> int:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def chunk_counts_by_locale(self, deadline: Deadline) -> dict[str, int]:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            rows = self._db.execute("SELECT locale, chunk_ids FROM documents").fetchall()
        counts: dict[str, int] = {}
        for locale, chunk_ids in rows:
            counts[locale] = counts.get(locale, 0) + len(json.loads(chunk_ids))
        return counts

    def locales_in(
        self, scope_ids: Sequence[str], doc_ids: Sequence[str], deadline: Deadline
    ) -> list[str]:
        call_budget_s(self.name, deadline, what="a read")
        found: set[str] = set()
        with self._lock:
            # Scope by scope: each is then a seek in (scope_id, locale).
            for scope_id in dict.fromkeys(scope_ids) or [None]:
                found.update(self._locales_where(scope_id, doc_ids))
        return sorted(found)

    def _locales_where(self, scope_id: str | None, doc_ids: Sequence[str]) -> list[str]:
        # Numbered parameters: the condition appears twice, its values once.
        params = ([scope_id] if scope_id is not None else []) + list(doc_ids)
        numbers = [f"?{n}" for n in range(1, len(params) + 1)]
        where = ["chunk_ids != '[]'"]
        if scope_id is not None:
            where.append(f"scope_id = {numbers.pop(0)}")
        if doc_ids:
            where.append(f"doc_id IN ({', '.join(numbers)})")
        statement = _LOCALES_WHERE.format(where=" AND ".join(where))
        return [r[0] for r in self._db.execute(statement, params).fetchall()]

    def get_meta(self, key: str, deadline: Deadline) -> str | None:
        call_budget_s(self.name, deadline, what="a read")
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str, deadline: Deadline) -> None:
        call_budget_s(self.name, deadline, what="a write")
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False  # local files: a failed write is an error, never retried

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")


def _entry(row: tuple[str, ...]) -> ManifestEntry:
    return ManifestEntry(
        doc_id=row[0],
        locale=row[1],
        scope_id=row[2],
        content_hash=row[3],
        metadata_hash=row[4],
        chunk_ids=tuple(json.loads(row[5])),
        chunk_hashes=tuple(json.loads(row[6])),
        updated_at=row[7],
    )
