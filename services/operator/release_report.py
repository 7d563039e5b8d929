"""The release record: what a release check saw, as JSON and as a readable
summary, written atomically next to each other.

Why a record and not just an exit code: when an answer goes wrong weeks
later, the question is what the index held and how it was judged when it was
opened to the public. So the record keeps the dry-run diff, the audit, every
golden query's result, the index's counts and the gate configuration the
check could see, and says in `checks` and `failures` why it passed or not.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.core.files import atomic_write_text
from services.operator.golden import GoldenScores, QueryOutcome

RECORD_FORMAT = "rag-release-check/1"
STATE_FIELDS = ("unchanged", "metadata_only", "changed", "added", "removed", "rejected")


@dataclass(frozen=True)
class Thresholds:
    """What the golden queries must reach (all of them pass, by default)."""

    min_pass_rate: float = 1.0
    min_mrr: float = 0.0
    default_top_k: int = 5


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class DryRunSection:
    """The Indexer's own plan for the source: anything but `unchanged` means
    the index does not hold what the source says."""

    documents: int
    counts: dict[str, int]
    plan: dict[str, int]
    differing: list[dict[str, str]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # by rule: a link, a FIFO; not a failure
    in_sync: bool = False
    # Why the plan holds no removals although it was asked for them (a source
    # could not be read: services.operator.ingest); "" when it does.
    sync_skipped: str = ""


@dataclass
class VerifySection:
    available: bool
    clean: bool = False
    error: str = ""
    documents: int = 0
    committed_generation: int = 0
    findings_total: int = 0
    counts: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GoldenSection:
    path: str
    sha256: str
    scores: GoldenScores
    outcomes: list[QueryOutcome]


@dataclass
class StatsSection:
    documents: int
    chunks: int
    chunks_by_locale: dict[str, int]
    vectors: int
    lexical_rows: int
    manifest_rows: int
    last_run: dict[str, int]
    committed_generation: int
    pending_documents: int
    embedding_model: str
    embedding_dim: int
    chunking: dict[str, Any]
    vector_backend: str
    lexical_backend: str


@dataclass
class GenerationSection:
    """The index generation the check judged, read before and after it; a
    change means the verdict describes an index that is no longer served."""

    at_start: int
    at_end: int
    verified: int | None  # what Verify reported, when it ran
    served: int | None  # what the Retriever serves (IndexStatus), when it answers
    stable: bool


@dataclass
class GateConfig:
    """The gate configuration the CLI can know; the Retriever's own answer
    gates are not reachable over RPC, so they are not in the record."""

    golden_file: str
    golden_sha256: str
    thresholds: Thresholds
    indexer_addr: str
    retriever_addr: str
    gateway_env: dict[str, str]


@dataclass
class ReleaseRecord:
    checked_at: str
    passed: bool
    failures: list[str]
    checks: list[Check]
    source: dict[str, str]
    generation: GenerationSection
    dry_run: DryRunSection
    verify: VerifySection
    golden: GoldenSection
    stats: StatsSection
    gate_config: GateConfig
    format: str = RECORD_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class WrittenRecord:
    json_path: Path
    summary_path: Path
    json_text: str
    summary: str


def write_record(record: ReleaseRecord, out_dir: Path, stamp: str) -> WrittenRecord:
    """`release-<stamp>.json` + `.md`, then `latest.json` + `latest.md`; each
    file appears whole or not at all, so a reader never sees half a record."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base = _free_name(out_dir, f"release-{stamp}")
    text, summary = record.to_json(), render_summary(record)
    json_path, summary_path = out_dir / f"{base}.json", out_dir / f"{base}.md"
    for path, content in (
        (json_path, text),
        (summary_path, summary),
        (out_dir / "latest.json", text),
        (out_dir / "latest.md", summary),
    ):
        # A name only this process could hold (undecodable bytes kept as lone
        # surrogates) is written escaped rather than failing the record.
        safe = content.encode("utf-8", "backslashreplace").decode("utf-8")
        atomic_write_text(path, safe, durable=True)
    return WrittenRecord(json_path, summary_path, text, summary)


def _free_name(out_dir: Path, base: str) -> str:
    """Two checks in the same second keep both records."""
    name, n = base, 1
    while (out_dir / f"{name}.json").exists():
        n += 1
        name = f"{base}-{n}"
    return name


def render_summary(record: ReleaseRecord) -> str:
    """A Markdown summary a person reads first: verdict, why, then the numbers."""
    verdict = "PASSED" if record.passed else "FAILED"
    lines = [
        f"# Release check {verdict}",
        "",
        f"- checked at: {record.checked_at}",
        f"- source: {record.source['path']} (scope {record.source['scope']})",
        f"- index generation: {_generation_line(record.generation)}",
        "",
        "## Checks",
        "",
        *(f"- [{'x' if c.passed else ' '}] {c.name}: {c.detail}" for c in record.checks),
    ]
    if record.failures:
        lines += ["", "## Failures", "", *(f"- {f}" for f in record.failures)]
    lines += ["", "## Dry run", "", *_dry_run_lines(record.dry_run)]
    lines += ["", "## Index", "", *_stats_lines(record.stats), ""]
    lines += ["## Golden queries", "", *_golden_lines(record.golden), ""]
    return "\n".join(lines)


def _generation_line(gen: GenerationSection) -> str:
    served = "unknown" if gen.served is None else str(gen.served)
    return f"{gen.at_start} at start, {gen.at_end} at end, {served} served by the Retriever"


def _dry_run_lines(dry_run: DryRunSection) -> list[str]:
    counts = ", ".join(f"{k}={dry_run.counts[k]}" for k in STATE_FIELDS)
    lines = [f"- {dry_run.documents} documents in the source: {counts}"]
    lines += [f"- {d['state']}: {d['doc_id']}" for d in dry_run.differing[:20]]
    lines += [f"- rejected: {r}" for r in dry_run.rejected[:20]]
    lines += [f"- skipped: {r}" for r in dry_run.skipped[:20]]
    lines += [f"- {dry_run.sync_skipped}"] if dry_run.sync_skipped else []
    return lines


def _stats_lines(stats: StatsSection) -> list[str]:
    locales = ", ".join(f"{k}={v}" for k, v in sorted(stats.chunks_by_locale.items())) or "none"
    last = ", ".join(f"{k}={stats.last_run.get(k, 0)}" for k in STATE_FIELDS)
    return [
        f"- documents: {stats.documents} (manifest rows {stats.manifest_rows})",
        f"- chunks: {stats.chunks} by locale: {locales}",
        f"- vectors: {stats.vectors}, lexical rows: {stats.lexical_rows}",
        f"- last run: {last}",
        f"- embedding model: {stats.embedding_model} ({stats.embedding_dim} dimensions)",
        f"- pending documents: {stats.pending_documents}",
    ]


def _golden_lines(golden: GoldenSection) -> list[str]:
    s = golden.scores
    lines = [
        f"{s.passed}/{s.queries} passed (pass rate {s.pass_rate}); over {s.ranked_queries} "
        f"ranked queries hit@1 {s.hit_at_1}, MRR {s.mrr}",
        "",
        "| line | query | result | rank |",
        "|---|---|---|---|",
    ]
    for o in golden.outcomes:
        result = "pass" if o.passed else "FAIL: " + "; ".join(o.problems)
        query = o.query if len(o.query) <= 60 else o.query[:57] + "..."
        lines.append(f"| {o.label} | {_cell(query)} | {_cell(result)} | {o.rank or '-'} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
