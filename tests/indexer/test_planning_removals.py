"""Planner.plan_removals: what a caller cannot remove reads the same whether
it is missing or in a scope (and locales) the caller does not hold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from services.indexer.chunking import Chunker
from services.indexer.planning import DocState, DocumentPlan, Planner
from services.indexer.validation import DocumentLimits
from services.runtime.security.callers import ScopeGrant
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.manifest import ManifestEntry

pytestmark = pytest.mark.unit

ALPHA = ScopeGrant.of(["alpha"])


def entry(doc_id: str, locale: str, scope_id: str) -> ManifestEntry:
    ids = (f"{doc_id}-{locale}-0", f"{doc_id}-{locale}-1")
    return ManifestEntry(doc_id, locale, scope_id, "h", "m", ids, ("a", "b"))


@pytest.fixture
def planner(tmp_path: Path) -> Iterator[Planner]:
    manifest = SqliteManifest(tmp_path / "manifest.sqlite")
    manifest.put_many(
        [
            entry("beta-page", "en", "beta"),
            entry("beta-page", "de", "beta"),
            entry("shared", "en", "alpha"),
            entry("shared", "de", "beta"),
            entry("mine", "en", "alpha"),
        ],
        deadline=unrequested_deadline(),
    )
    yield Planner(Chunker(), manifest, DocumentLimits())
    manifest.close()


def as_if(plan: DocumentPlan, doc_id: str) -> DocumentPlan:
    """`plan` with its doc_id (field and words) replaced by `doc_id`."""
    return replace(plan, doc_id=doc_id, error=plan.error.replace(repr(plan.doc_id), repr(doc_id)))


@pytest.mark.parametrize(
    "foreign_keys",
    [
        [("beta-page", "en")],  # a locale asked for
        [("beta-page", "de"), ("beta-page", "en")],  # every locale of the id, as looked up
    ],
)
def test_a_foreign_document_reads_exactly_like_a_missing_one(
    planner: Planner, foreign_keys: list[tuple[str, str]]
) -> None:
    missing = planner.plan_removals([("no-such", "")], ALPHA, deadline=unrequested_deadline())
    foreign = planner.plan_removals(foreign_keys, ALPHA, deadline=unrequested_deadline())
    assert [as_if(p, "no-such") for p in foreign] == missing
    assert missing == [
        DocumentPlan(
            "no-such",
            "",
            DocState.REJECTED,
            error_code="NOT_FOUND",
            error="doc_id 'no-such' is not indexed",
        )
    ]


def test_a_doc_id_held_in_both_scopes_answers_with_the_callers_locales_only(
    planner: Planner,
) -> None:
    shared = planner.plan_removals(
        [("shared", "de"), ("shared", "en")], ALPHA, deadline=unrequested_deadline()
    )
    mine = planner.plan_removals([("mine", "en")], ALPHA, deadline=unrequested_deadline())
    assert [p.state for p in shared] == [DocState.REMOVED]
    assert shared[0].to_delete == ["shared-en-0", "shared-en-1"]
    assert [p.state for p in mine] == [DocState.REMOVED]


def test_every_scope_removes_every_locale(planner: Planner) -> None:
    for scopes in (None, ScopeGrant.every()):
        plans = planner.plan_removals(
            [("beta-page", "de"), ("beta-page", "en")], scopes, deadline=unrequested_deadline()
        )
        assert [(p.locale, p.state) for p in plans] == [
            ("de", DocState.REMOVED),
            ("en", DocState.REMOVED),
        ]


def test_order_follows_the_keys_and_each_missing_id_answers_once(planner: Planner) -> None:
    keys = [("x", "en"), ("mine", "en"), ("x", "de"), ("beta-page", "en"), ("y", "")]
    plans = planner.plan_removals(keys, ALPHA, deadline=unrequested_deadline())
    assert [(p.doc_id, p.state) for p in plans] == [
        ("x", DocState.REJECTED),
        ("mine", DocState.REMOVED),
        ("beta-page", DocState.REJECTED),
        ("y", DocState.REJECTED),
    ]
