"""The storage package (both stores, the manifests, point ids) stands alone:
`verify` and every service open it, so it must not depend on any of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

STORES = Path(__file__).resolve().parents[2] / "services" / "storage"
SERVICE_PACKAGES = ("services.indexer", "services.retriever", "services.reranker", "services.stack")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_storage_module_imports_a_service() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in STORES.glob("*.py")
        for module in imported_modules(path)
        if module.startswith(SERVICE_PACKAGES) or module.startswith("gateway")
    }
    assert not offenders


def test_the_boundary_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from services.indexer.identity import chunk_id\n")
    assert "services.indexer.identity" in imported_modules(module)
