"""`release-check` against the real embedded stack: a passing record, a failing
one (a changed document in the source and a golden query whose document is
not indexed), and the usage and connection errors that leave no record."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.storage.base import unrequested_deadline
from services.storage.visibility import read_release
from tests.support.corpus import CORPUS_DIR
from tests.support.release_check import (
    BASE_URL,
    GOLDEN,
    copy_corpus,
    ingest,
    release_check,
    run_cli,
    write_golden,
)
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.integration

N_DOCS = len(list(CORPUS_DIR.glob("*.md")))
# Each test takes a stack of its own (`empty_stack`): documents are keyed by
# (doc_id, locale), so two scopes holding the same corpus would move documents
# between them.


def latest(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "latest.json").read_text(encoding="utf-8")))


def test_passing_record(empty_stack: BackgroundStack, tmp_path: Path) -> None:
    source = copy_corpus(tmp_path / "site")
    (source / "alias.md").symlink_to(source / "billing.md")  # skipped by rule: no failure
    ingest(empty_stack, source, "site-a")
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    env = {
        "RAG_GATEWAY_REQUIRE_RELEASE": "true",
        "RAG_GATEWAY_REDIS_URL": "redis://ops:s3cret@redis.internal:6379/0",
    }
    out = tmp_path / "records"
    done = release_check(empty_stack, source, "site-a", golden, out, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# Release check PASSED" in done.stdout

    record = latest(out)
    assert record["passed"] is True and record["failures"] == []
    assert [c["name"] for c in record["checks"]] == [
        "dry_run",
        "verify",
        "scopes",
        "golden",
        "generation",
    ]
    assert record["dry_run"]["counts"] == {
        "unchanged": N_DOCS,
        "metadata_only": 0,
        "changed": 0,
        "added": 0,
        "removed": 0,
        "rejected": 0,
    }
    assert record["dry_run"]["in_sync"] is True and record["dry_run"]["sync_skipped"] == ""
    assert record["dry_run"]["skipped"] == [
        "alias.md: symbolic link, skipped: pass --follow-symlinks to follow links that stay "
        "inside the folder"
    ]
    assert record["verify"]["available"] and record["verify"]["clean"]
    scores = record["golden"]["scores"]
    assert (scores["queries"], scores["passed"], scores["ranked_queries"]) == (5, 5, 4)
    assert 0 < scores["mrr"] <= 1 and 0 <= scores["hit_at_1"] <= 1
    ranks = {o["label"]: o["rank"] for o in record["golden"]["outcomes"]}
    assert ranks["export-code"] is not None and ranks["missing-page"] is None

    stats = record["stats"]
    assert stats["chunks_by_locale"]["en"] == stats["vectors"] == stats["lexical_rows"] > 0
    assert stats["last_run"]["added"] == N_DOCS  # the ingest before the check
    assert stats["embedding_model"]
    gen = record["generation"]
    assert gen["stable"] and gen["at_start"] == gen["at_end"] == stats["committed_generation"]

    gate = record["gate_config"]
    assert gate["golden_sha256"] and gate["thresholds"]["min_pass_rate"] == 1.0
    assert gate["retriever_addr"] == empty_stack.retriever_addr
    assert gate["gateway_env"]["RAG_GATEWAY_REQUIRE_RELEASE"] == "true"
    assert gate["gateway_env"]["RAG_GATEWAY_REDIS_URL"] == "redis://***@redis.internal:6379/0"

    # Written twice (timestamped and latest), each with its summary, and stored with the index.
    assert len(list(out.glob("release-*.json"))) == 1 and (out / "latest.md").is_file()
    assert runtime_verdict(empty_stack) == (True, gen["at_start"])


def test_failing_record_names_the_diff_and_the_golden_query(
    empty_stack: BackgroundStack, tmp_path: Path
) -> None:
    source = copy_corpus(tmp_path / "site")
    ingest(empty_stack, source, "site-b")
    with (source / "billing.md").open("a", encoding="utf-8") as page:
        page.write("\n## Refunds\n\nRefunds are booked against the next invoice.\n")
    lost: dict[str, object] = {
        "id": "lost",
        "query": "quarterly tax filing",
        "expected_doc_ids": ["taxes.md"],
    }
    golden = write_golden(tmp_path / "golden.jsonl", [GOLDEN[0], lost])
    out = tmp_path / "records"

    done = release_check(empty_stack, source, "site-b", golden, out)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "# Release check FAILED" in done.stdout
    record = latest(out)
    assert record["passed"] is False
    checks = {c["name"]: c for c in record["checks"]}
    assert not checks["dry_run"]["passed"]
    assert checks["dry_run"]["detail"] == "the index does not hold what the source says: changed=1"
    assert record["dry_run"]["differing"] == [{"doc_id": "billing.md", "state": "changed"}]
    assert record["dry_run"]["plan"]["chunks_to_embed"] >= 1  # the plan, not a write
    assert not checks["golden"]["passed"]
    lost_line = "golden lost ('quarterly tax filing'): none of taxes.md in the top 5"
    assert any(f.startswith(lost_line) for f in record["failures"]), record["failures"]
    outcomes = {o["label"]: o for o in record["golden"]["outcomes"]}
    assert outcomes["status-429"]["passed"] and not outcomes["lost"]["passed"]
    assert runtime_verdict(empty_stack)[0] is False
    # The dry run wrote nothing: the index still holds the old page.
    replan = run_cli(
        empty_stack.indexer_addr,
        "ingest",
        str(source),
        "--scope",
        "site-b",
        "--base-url",
        BASE_URL,
        "--dry-run",
        "--quiet",
    )
    assert "changed=1" in replan.stdout

    # A file that cannot be read makes the plan's removals unknowable: the record says so.
    (source / "half-saved.md").write_bytes(b"# Half\n\n\xe2\x80")
    unread = release_check(empty_stack, source, "site-b", golden, out)
    assert unread.returncode == 1
    skipped = latest(out)["dry_run"]["sync_skipped"]
    assert skipped.startswith("sync skipped: 1 source(s) could not be read")
    assert f"- {skipped}" in unread.stdout
    (source / "half-saved.md").unlink()

    # A misspelt scope holds none of the source: a usage error, and the verdict stays.
    typo = release_check(empty_stack, source, "site-bb", golden, out)
    assert typo.returncode == 2
    assert "--scope 'site-bb' holds no documents in the index" in typo.stderr
    assert len(list(out.glob("release-*.json"))) == 2

    # A source that is not there is a usage error: exit 2 and no new record.
    missing = release_check(empty_stack, tmp_path / "nowhere", "site-b", golden, out)
    assert missing.returncode == 2 and "release check error" in missing.stderr
    assert len(list(out.glob("release-*.json"))) == 2


def runtime_verdict(stack: BackgroundStack) -> tuple[bool, int]:
    assert stack.runtime is not None
    verdict = read_release(stack.runtime.storage.manifest, unrequested_deadline())
    assert verdict is not None
    return verdict.passed, verdict.generation


def release_check_at_closed_port(
    source: Path, golden: Path, out: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`release-check` of scope "s" with nothing listening at the Indexer's address."""
    return run_cli(
        f"127.0.0.1:{free_port()}",
        "release-check",
        str(source),
        "--scope",
        "s",
        "--golden",
        str(golden),
        "--out",
        str(out),
        *args,
    )


@pytest.mark.unit
def test_malformed_golden_file_is_a_usage_error_with_no_record(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"query": "ok", "expected_doc_ids": ["a.md"]}\n{"query": "x"}\n')
    out = tmp_path / "records"
    done = release_check_at_closed_port(tmp_path, golden, out)
    assert done.returncode == 2
    assert f"{golden}:2: expected_doc_ids: is required" in done.stderr
    assert not out.exists()


@pytest.mark.unit
def test_unreachable_services_are_a_connection_error_with_no_record(tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    out = tmp_path / "records"
    source = copy_corpus(tmp_path / "site")
    done = release_check_at_closed_port(
        source, golden, out, "--retriever-addr", f"127.0.0.1:{free_port()}"
    )
    assert done.returncode == 2
    assert "release check error: UNAVAILABLE" in done.stderr
    assert not out.exists()


@pytest.mark.unit
def test_an_out_path_that_is_a_file_is_a_usage_error_before_the_check(tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    out = tmp_path / "records"
    out.write_text("not a directory\n")
    done = release_check_at_closed_port(tmp_path, golden, out)
    assert done.returncode == 2
    assert f"--out: {out} is not a directory" in done.stderr
    assert "release check error" not in done.stderr  # refused before any service was asked


@pytest.mark.unit
def test_an_out_folder_inside_the_source_is_refused_unless_hidden(tmp_path: Path) -> None:
    """Its Markdown records would be indexed by the next ingest of the source."""
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    source = copy_corpus(tmp_path / "site")
    done = release_check_at_closed_port(source, golden, source / "records")
    assert done.returncode == 2
    assert f"--out: {source / 'records'} is inside the source folder" in done.stderr
    assert "release check error" not in done.stderr  # refused before any service was asked
    hidden = release_check_at_closed_port(source, golden, source / ".release-checks")
    assert "inside the source folder" not in hidden.stderr
    assert "release check error: UNAVAILABLE" in hidden.stderr  # it went on to ask


def test_a_check_of_one_scope_does_not_open_another(
    empty_stack: BackgroundStack, tmp_path: Path
) -> None:
    """Probe: the verdict opens the whole index, so an unchecked scope beside
    the checked one was served through the gate; and a golden line the
    Retriever refuses (top_k past its limit) failed the check with a record."""
    source = copy_corpus(tmp_path / "site")
    ingest(empty_stack, source, "docs")
    other = tmp_path / "other"
    other.mkdir()
    (other / "restore.md").write_text("# Restore a backup\n\nUnchecked content.\n")
    ingest(empty_stack, other, "other")
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    out = tmp_path / "records"
    done = release_check(empty_stack, source, "docs", golden, out)
    assert done.returncode == 1, done.stdout + done.stderr
    checks = {c["name"]: c for c in latest(out)["checks"]}
    assert not checks["scopes"]["passed"] and "'other'" in checks["scopes"]["detail"]
    assert runtime_verdict(empty_stack)[0] is False
    extra = ("--unchecked-scope", "other")
    named = release_check(empty_stack, source, "docs", golden, out, extra=extra)
    assert named.returncode == 0, named.stdout + named.stderr
    assert runtime_verdict(empty_stack)[0] is True

    wide = write_golden(tmp_path / "wide.jsonl", [{**GOLDEN[0], "top_k": 60}])
    refused = release_check(empty_stack, source, "docs", wide, out)
    assert refused.returncode == 2
    assert "the Retriever refuses it: top_k: 60 is outside 1..50" in refused.stderr
    assert runtime_verdict(empty_stack)[0] is True  # no record: the verdict stays
