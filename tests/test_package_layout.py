"""The package layout keeps its direction (docs/architecture.md):

    services.core       the domain                   imports nothing else from services
    services.contract   generated gRPC stubs         imports nothing else from services
    services.embedding  the embedding engine         imports services.core only
    services.storage    the one index facade         imports services.core only
                        (backends below it: storage.embedded, storage.server, storage.postgres)
    services.runtime    what a process needs         core, embedding, storage, contract,
                                                     rag_client (its token source)
    services.indexer / retriever / reranker / stack
                        the services                 anything above, never sources or operator
    services.sources    reading folders into documents  core, indexer (its markup and limits)
    services.operator   operator tooling             anything in services, rag_client

and outside services:

    rag_client          the one client layer         services.contract only
    gateway             the HTTP front               core, runtime, contract, rag_client
    bench, scripts      measurement and launchers    anything, never the other one's private parts

No package of services imports gateway, bench, scripts or tests; the old
catch-all package, `common`, does not come back."""

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
    "services.embedding": {"services.core", "services.embedding"},
    "services.storage": {"services.core", "services.storage"},
    "services.runtime": {
        "services.core",
        "services.embedding",
        "services.storage",
        "services.contract",
        "services.runtime",
        "rag_client",  # the one TokenSource of every client
    },
    "services.sources": {"services.core", "services.indexer", "services.sources"},
    "rag_client": {"services.contract", "rag_client"},
    "gateway": {
        "services.core",
        "services.runtime",
        "services.contract",
        "rag_client",
        "gateway",
    },
}
OPERATOR = "services.operator"
SOURCES = "services.sources"
# Top-level packages checked, and what they may never import.
TOP_LEVEL = ("services", "gateway", "rag_client", "bench", "scripts")
NEVER_FROM_SERVICES = ("gateway", "bench", "scripts", "tests")


def imported_modules(source: str) -> set[str]:
    """Every module a file imports, at any depth (imports inside functions too);
    `from services import core` counts as `services.core`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module in ("services", "services.storage", "services.indexer"):
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def package_of(module: str) -> str:
    """`services.core.analysis.scripts` -> `services.core`; `gateway.app` -> `gateway`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "services" else parts[0]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def wrong_way(own: str, module: str) -> str | None:
    """Why `own` must not import `module`, or None when it may."""
    target = package_of(module)
    if module == "services":
        return None  # `from services import x`: x is checked on its own
    if target == "services.common":
        return f"imports {module}, a package that is gone"
    if target.split(".")[0] not in (*TOP_LEVEL, "tests"):
        return None  # third-party
    if own.startswith("services") and target in NEVER_FROM_SERVICES:
        return f"{own} must not import {module}"
    if own in ALLOWED and target not in ALLOWED[own]:
        return f"{own} must not import {module}"
    if target == OPERATOR and own not in (OPERATOR, "bench", "scripts"):
        return f"only {OPERATOR} imports {module}"
    if target == SOURCES and own.startswith("services.") and own not in (SOURCES, OPERATOR):
        return f"the services never import {module}: reading folders is the client's side"
    return None


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for top in TOP_LEVEL:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts or "genproto" in path.parts:
                continue
            own = package_of(".".join(path.relative_to(root).with_suffix("").parts))
            for module in sorted(imported_modules(path.read_text(encoding="utf-8"))):
                reason = wrong_way(own, module)
                if reason is not None:
                    found.append(f"{path.relative_to(root)}: {reason}")
    return found


def test_every_import_goes_the_allowed_way() -> None:
    assert violations() == []


def test_the_old_catch_all_package_is_gone() -> None:
    assert sorted((SERVICES / "common").rglob("*.py")) == []


def test_the_layers_exist() -> None:
    for package in (*ALLOWED, OPERATOR, SOURCES):
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


def test_the_check_covers_every_top_level_package(tmp_path: Path) -> None:
    for top, line in (
        ("rag_client", "from services.retriever.app import RetrieverApp\n"),
        ("gateway", "import services.storage.storage\n"),
        ("services/indexer", "from services.sources.loaders import load_directory\n"),
        ("services/embedding", "from services.storage.storage import Storage\n"),
    ):
        module = tmp_path / top / "m.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(line)
    assert len(violations(tmp_path)) == 4


def test_the_indexer_server_does_not_reach_the_loader() -> None:
    """An upsert never enters the folder loader (nor its YAML and HTML-head parsers)."""
    for path in sorted((SERVICES / "indexer").rglob("*.py")):
        assert "services.sources" not in path.read_text(encoding="utf-8"), path


def runtime_imports(source: str, modules: set[str]) -> set[str]:
    """The modules of `modules` a file imports when it runs (at any depth),
    leaving out `if TYPE_CHECKING:` blocks; `from a import b` counts as `a.b`
    when that is a module."""
    tree = ast.parse(source)
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return found & modules


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a circle
    (strongly connected components of more than one module)."""
    paths = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for top in TOP_LEVEL
        for path in sorted((root / top).rglob("*.py"))
        if "__pycache__" not in path.parts and "genproto" not in path.parts
    }
    edges = {
        m: runtime_imports(p.read_text(encoding="utf-8"), set(paths)) for m, p in paths.items()
    }
    return [sorted(group) for group in _components(edges) if len(group) > 1]


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def test_no_modules_import_each_other() -> None:
    """A circle of imports (even through imports inside functions) means no
    module of it can be read, tested or moved without the others."""
    assert import_cycles() == []


def test_the_cycle_check_sees_a_circle_through_a_function(tmp_path: Path) -> None:
    package = tmp_path / "services" / "core"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from services.core.b import x\n")
    (package / "b.py").write_text("def f():\n    from services.core import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from services.core.a import y\n"
    )
    (package / "d.py").write_text("from services.core.c import z\n")
    assert import_cycles(tmp_path) == [["services.core.a", "services.core.b"]]
