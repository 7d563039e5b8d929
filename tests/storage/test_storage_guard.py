"""Outside `services/storage`, an index is reached only through the
members its facade and protocols declare (`Storage`, `VectorStore`,
`LexicalStore`, `Manifest`): no `getattr`/`hasattr` probing of a store, and no
member a protocol does not declare (mypy checks typed code; this also covers
code that passes stores around untyped, e.g. bench scripts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from services.storage.base import LexicalStore, VectorStore
from services.storage.manifest import Manifest
from services.storage.storage import Storage

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
STORES_PACKAGE = ROOT / "services" / "storage"
SCANNED = ("services", "gateway", "bench", "scripts")


def _members(cls: type) -> frozenset[str]:
    names = {name for name in vars(cls) if not name.startswith("_")}
    return frozenset(names | set(getattr(cls, "__annotations__", {})))


# The attribute names the code base gives each part (and the facade).
DECLARED = {
    "vectors": _members(VectorStore),
    "lexical": _members(LexicalStore),
    "manifest": _members(Manifest),
    "storage": _members(Storage),
}
PROBES = {"getattr", "hasattr"}
# Same names, other things: (file, "name.member") -> what it is.
NOT_STORES = {
    ("gateway/breaker.py", "storage.opened_at"): "pybreaker's state storage",
    ("bench/scale/build.py", "vectors.shape"): "the synthetic corpus's numpy matrix",
}


def _sources() -> list[Path]:
    files = [path for folder in SCANNED for path in (ROOT / folder).rglob("*.py")]
    return [f for f in files if STORES_PACKAGE not in f.parents and "genproto" not in f.parts]


def _part_name(node: ast.expr) -> str | None:
    """`x.vectors` / `x.storage` (an attribute, so a local numpy `vectors` is not one)."""
    if isinstance(node, ast.Attribute):
        name = node.attr.lstrip("_")
        return name if name in DECLARED else None
    return None


def _undeclared(part: str, member: str, path: str) -> bool:
    return member not in DECLARED[part] and (path, f"{part}.{member}") not in NOT_STORES


def violations(source: str, path: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            part = _part_name(node.value)
            if part and _undeclared(part, node.attr, path):
                found.append(f"{path}:{node.lineno}: {part}.{node.attr} is not declared")
        is_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if is_call and node.func.id in PROBES and node.args and _part_name(node.args[0]):
            found.append(f"{path}:{node.lineno}: {node.func.id} probes a store")
    return found


def test_no_module_outside_the_stores_reaches_an_undeclared_store_member() -> None:
    found = [v for f in _sources() for v in violations(f.read_text(), str(f.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "self.lexical._calls.on_retry = hook",
        "getattr(self.lexical, 'analyzer', None)",
        "pipeline.vectors.shard_path",
        "parts.storage.engine",
    ],
)
def test_the_guard_catches_a_probe_or_an_undeclared_member(source: str) -> None:
    assert violations(source, "x.py")


def test_declared_members_pass() -> None:
    source = "self.storage.analyzer\nself.vectors.search(v, 5, s)\nself.lexical.describe_query(q)"
    assert violations(source, "x.py") == []
