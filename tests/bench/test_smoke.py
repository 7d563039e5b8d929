"""The smoke versions of `make eval` and `make bench`, run as the commands
themselves (subprocesses starting the real services) on 20 SciFact queries
and ~60 documents, so `make test-smoke` keeps the full commands working (they
take too long for CI's 90 minutes beside the rest on 2 cores). Results go to
a temporary folder, never over the committed ones in bench/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.common.paths import BENCH_VENV_PYTHON, SHARED_DATASETS
from bench.eval.metrics import MEASURES
from tests.support.bench_command import COMMAND_TIMEOUT_S, run_bench_module

# A command may take ~300 s idle on a fresh data folder (the model's graphs are
# built first) and more on a loaded CI machine: the per-test limit covers one
# command (the fixture a test first needs) with the fine-tuning before it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.bench_smoke,
    pytest.mark.timeout(COMMAND_TIMEOUT_S + 300),
]

SCIFACT = SHARED_DATASETS / "scifact"
BASE_CONFIGS = ("lexical", "vector", "hybrid")
RECORD_FIELDS = ("command", "date", "git_revision", "machine")

if not (SCIFACT / "corpus.jsonl").is_file():
    pytest.skip(
        f"SciFact not found at {SCIFACT} (CI clones the repository with shared/ beside it)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-smoke")


@pytest.fixture(scope="module")
def results(folder: Path) -> Path:
    """One eval smoke run, then one bench smoke run on the same folder (so the
    second command finds the index the first one built). Each command has a
    fixture of its own, so the test that first needs it pays for it alone: four
    commands in one fixture took ~390 s idle, over the per-test limit."""
    model = tiny_finetuned_model(folder / "finetuned-model")
    run_bench_module("bench.eval.scifact", folder, "--no-peer", "--finetuned-model", str(model))
    return folder


@pytest.fixture(scope="module")
def bench_results(results: Path) -> Path:
    run_bench_module("bench.load.speed", results)
    return results


@pytest.fixture(scope="module")
def diversity_results(results: Path) -> Path:
    run_bench_module("bench.eval.diversity", results)
    return results


@pytest.fixture(scope="module")
def storage_results(results: Path) -> Path:
    run_bench_module("bench.eval.storage_modes", results)
    return results


def tiny_finetuned_model(target: Path) -> Path:
    """A bench.eval.finetune model from 8 train queries: proves the mechanics of
    measuring a fitted model next to the packaged one, never its quality."""
    from bench.common.record import run_record
    from bench.eval.dataset import BeirDataset
    from bench.eval.finetune import Recipe, fit

    train = BeirDataset(SCIFACT, "train")
    fit(train, list(train.queries())[:8], target, Recipe(batch_size=4), run_record(["test"]))
    return target


def load(path: Path) -> dict[str, Any]:
    assert path.is_file(), f"{path.name} was not written"
    return json.loads(path.read_text())


def test_eval_writes_every_metric_per_configuration(results: Path) -> None:
    result = load(results / "scifact-smoke.json")
    assert all(result[field] for field in RECORD_FIELDS)
    assert result["dataset"] == "scifact-smoke" and result["split"] == "test"
    assert result["queries"] == 20
    for name in BASE_CONFIGS:
        metrics = result["configs"][name]
        for metric in MEASURES:
            assert 0.0 <= metrics[metric] <= 1.0, (name, metric)
        assert metrics["errors"] == {} and metrics["latency"]["n"] == 20
    # The relevant documents are in the small index, so every channel finds most of them.
    assert all(result["configs"][n]["recall@100"] >= 0.8 for n in BASE_CONFIGS)
    rerank = "hybrid+rerank"
    assert rerank in result["configs"] or result["not_measured"][rerank]
    assert result["chunking"]["title_as_heading"] is True
    assert result["chunking"]["chunks"] >= result["chunking"]["documents"] > 40
    assert not result["index"]["reused"]
    packaged = result["configs"]["hybrid"]["ndcg@10"]
    finetuned = result["finetuned"]["configs"]["hybrid"]["ndcg@10"]
    # One target per model (docs/targets.md: hybrid nDCG@10 >= 0.74).
    assert [t["measured"] for t in result["targets"]] == [packaged, finetuned]
    assert {t["threshold"] for t in result["targets"]} == {0.74}
    for target in result["targets"]:
        assert target["met"] == (target["measured"] >= target["threshold"])
        missed = target["verdict"].startswith("missed by")
        assert target["verdict"] == "met" if target["met"] else missed


def test_eval_measures_the_finetuned_model_in_an_index_of_its_own(results: Path) -> None:
    result = load(results / "scifact-smoke.json")
    finetuned = result["finetuned"]
    assert set(finetuned["configs"]) == {"vector", "hybrid"}
    for metrics in finetuned["configs"].values():
        assert metrics["errors"] == {} and metrics["latency"]["n"] == 20
        assert metrics["recall@100"] >= 0.8
    assert finetuned["chunking"]["embedding_model"] == finetuned["model"]
    assert finetuned["chunking"]["chunks"] == result["chunking"]["chunks"]
    assert not finetuned["index"]["reused"]  # its own vectors, not the packaged model's
    assert finetuned["card"]["queries"] == 8 and finetuned["validation"] is None


def test_second_command_reuses_the_index(bench_results: Path) -> None:
    bench = load(bench_results / "bench.json")
    assert bench["index"]["reused"] is True


def test_bench_writes_latencies_bounds_and_the_plot(bench_results: Path) -> None:
    bench = load(bench_results / "bench.json")
    assert all(bench[field] for field in RECORD_FIELDS)
    levels = {(r["mode"], r["concurrency"]) for r in bench["retrieve"]}
    assert levels == {(m, c) for m in ("no rerank", "rerank") for c in (1, 4, 16)}
    for row in bench["retrieve"]:
        latency = row["latency"]
        assert latency["n"] > 0 and 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
        assert row["throughput_rps"] > 0 and row["errors"] == {}
    assert all(r["rerank"]["used"] > 0 for r in bench["retrieve"] if r["mode"] == "rerank")
    for row in (r for r in bench["retrieve"] if r["mode"] == "rerank"):
        outcomes = row["rerank"]["outcomes"]
        assert outcomes["answers"] == row["latency"]["n"]
        assert sum(outcomes["counts"].values()) == outcomes["answers"]
    assert bench["embedding"]["bound_qps"] > 0 and bench["indexing"]["share"] > 0
    assert set(bench["memory"]) == {"stack (Indexer + Retriever)", "reranker"}
    assert all(m["rss_mib"] > 0 for m in bench["memory"].values())
    assert {d["deadline_ms"] for d in bench["deadline_check"]} == {50, 100, 200}
    assert (bench_results / bench["plot"]).read_bytes().startswith(b"\x89PNG")
    by_what = {t["what"]: t for t in bench["targets"]}
    # A ratio to the model alone, so the target holds on any machine the bench runs on.
    ratio = by_what[
        "Retrieve p50 without reranking, warm, concurrency 1 / the query embedding alone, p50"
    ]
    model_p50 = min(
        bench[m]["query_ms"]["p50_ms"] for m in ("embedding", "embedding_after_retrieve")
    )
    assert ratio["measured"] == round(bench["retrieve"][0]["latency"]["p50_ms"] / model_p50, 2)
    assert ratio["met"] == (ratio["measured"] <= 1.5)


def test_markdown_report_has_both_sections(bench_results: Path) -> None:
    page = (bench_results / "benchmarks.md").read_text()
    assert "## Quality: scifact-smoke, test split (20 queries)" in page
    header = "| configuration | nDCG@10 | Recall@100 | MRR@10 | hit@1 | top 3 | hit rate@5 | P@5 |"
    assert header in page
    assert "## Speed: Retrieve on scifact-smoke" in page
    assert "![Retrieve latency distributions](latency.png)" in page
    assert "### Speed targets" in page and "### Quality targets" in page
    assert "### Rerank outcome shares per concurrency level" in page
    assert "| hybrid, MiniLM fine-tuned on train |" in page
    assert "### The embedding model fine-tuned on the train split" in page


@pytest.mark.skipif(not BENCH_VENV_PYTHON.is_file(), reason="no .venv-bench: make bench-env")
def test_peer_pipeline_is_scored_by_the_same_harness(tmp_path: Path) -> None:
    from bench.eval.dataset import BeirDataset, write_subset
    from bench.eval.peer import run_peer

    subset = write_subset(BeirDataset(SCIFACT), tmp_path / "tiny", queries=5, filler_docs=10)
    peer = run_peer(BeirDataset(subset), depth=20)
    assert "not_measured" not in peer, peer.get("not_measured")
    assert set(peer["metrics"]) == set(MEASURES) and peer["latency"]["n"] == 5
    assert peer["metrics"]["recall@100"] > 0.5


def test_visibility_filter_bench_records_both_channels_with_and_without(tmp_path: Path) -> None:
    run_bench_module("bench.load.visibility_filter", tmp_path)
    result = json.loads((tmp_path / "visibility_filter.json").read_text())
    assert set(result["latency"]) == {"vector", "vector_filtered", "lexical", "lexical_filtered"}
    assert all(summary["n"] == 10 for summary in result["latency"].values())


def test_diversity_measures_each_lambda(diversity_results: Path) -> None:
    result = load(diversity_results / "diversity-smoke.json")
    assert [row["mmr_lambda"] for row in result["rows"]] == [0.0, 0.9, 0.7, 0.5]
    for row in result["rows"]:
        assert row["errors"] == 0 and 0.0 <= row["ndcg@10"] <= 1.0
        assert 1.0 <= row["distinct_documents_top10"] <= 10.0
        assert -1.0 <= row["mean_pairwise_cosine_top10"] <= 1.0
    # Diversity never lowers the number of distinct documents on average.
    plain, diverse = result["rows"][0], result["rows"][-1]
    assert diverse["distinct_documents_top10"] >= plain["distinct_documents_top10"]
    for field in RECORD_FIELDS:
        assert result[field]


def test_storage_modes_serve_the_same_rows_with_the_same_quality(storage_results: Path) -> None:
    result = load(storage_results / "storage-modes-smoke.json")
    embedded, postgres = result["modes"]["embedded"], result["modes"]["postgres"]
    assert result["copy_to_postgres"]["chunks"] > 0
    # The default index carries the cross-lingual vector; the copy keeps it.
    assert result["copy_to_postgres"]["second_vector_dim"] == 512
    assert result["postgres_settings"]["shared_buffers"]
    for config in BASE_CONFIGS:
        # The same rows and vectors: exact search at this size, the same BM25.
        assert postgres["quality"][config]["ndcg@10"] == pytest.approx(
            embedded["quality"][config]["ndcg@10"], abs=0.02
        )
    for measured in (embedded, postgres):
        for level in ("c1", "c16"):
            assert measured["serving"][level]["n"] == result["queries"]
            assert measured["serving"][level]["errors"] == {}
    for field in RECORD_FIELDS:
        assert result[field]
