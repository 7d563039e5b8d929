"""The package layout keeps its direction (docs/architecture.md):

    services.core      the domain                  imports nothing else from services
    services.contract  generated gRPC stubs        imports nothing else from services
    services.storage   the one index facade        imports services.core only
    services.runtime   what a process needs        imports core, storage, contract
    services.indexer / retriever / reranker / stack
                       the services                anything above, never services.operator
    services.operator  operator tooling            anything (services.indexer included)

and the old catch-all package, `common`, does not come back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "services"

ALLOWED: dict[str, set[str]] = {
    "services.core": {"services.core"},
    "services.contract": {"services.contract"},
    "services.storage": {"services.core", "services.storage"},
    "services.runtime": {
        "services.core",
        "services.storage",
        "services.contract",
        "services.runtime",
    },
}
OPERATOR = "services.operator"


def imported_modules(source: str) -> set[str]:
    """Every module a file imports, at any depth (imports inside functions too);
    `from services import core` counts as `services.core`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "services":
                names.update(f"services.{alias.name}" for alias in node.names)
    return names


def package_of(module: str) -> str:
    """`services.core.analysis.scripts` -> `services.core`."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "services").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        own = package_of(".".join(path.relative_to(root).with_suffix("").parts))
        for module in sorted(imported_modules(path.read_text(encoding="utf-8"))):
            if not module.startswith("services."):
                continue
            target = package_of(module)
            if target.split(".") == ["services", "common"]:
                found.append(f"{path.relative_to(root)}: imports {module}, a package that is gone")
            elif own in ALLOWED and target not in ALLOWED[own]:
                found.append(f"{path.relative_to(root)}: {own} must not import {module}")
            elif own not in ALLOWED and own != OPERATOR and target == OPERATOR:
                found.append(f"{path.relative_to(root)}: only {OPERATOR} imports {module}")
    return found


def test_every_import_goes_the_allowed_way() -> None:
    assert violations() == []


def test_the_old_catch_all_package_is_gone() -> None:
    assert sorted((SERVICES / "common").rglob("*.py")) == []


def test_the_layers_exist() -> None:
    for package in (*ALLOWED, OPERATOR):
        assert (ROOT / package.replace(".", "/") / "__init__.py").is_file(), package


def test_the_check_sees_imports_inside_functions_and_from_services(tmp_path: Path) -> None:
    module = tmp_path / "services" / "core" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "def f():\n    from services.runtime.settings import load_settings\n"
        "from services import storage\n"
    )
    assert violations(tmp_path) == [
        "services/core/m.py: services.core must not import services.runtime.settings",
        "services/core/m.py: services.core must not import services.storage",
    ]
