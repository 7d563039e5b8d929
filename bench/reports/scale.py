"""The benchmark page's section on scale (`python -m bench.scale`): latency,
memory, disk, write time and HNSW recall from 10k to 1M chunks, the targets
at 1M, and the latency-versus-size plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.reports.markdown import provenance, table, targets_table
from bench.reports.scale_capped import capped_note, capped_table
from bench.reports.targets import (
    SCALE_P50,
    SCALE_P99,
    SCALE_RECALL,
    SCALE_STACK_RSS,
    SCALE_WRITER_RSS,
)

RESULTS_FILE = "scale.json"
PLOT_FILE = "scale.png"
MIB = 2**20


def _latency(size: dict[str, Any], scope: str, concurrency: int) -> dict[str, Any]:
    for row in size["retrieve"]:
        if row["filter"] == scope and row["concurrency"] == concurrency:
            return dict(row)
    raise KeyError(f"no {scope} c={concurrency} row")


def _latency_rows(sizes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for size in sizes:
        for row in size["retrieve"]:
            latency = row["latency_ms"]
            rows.append(
                (
                    f"{size['chunks']:,}",
                    row["filter"],
                    row["concurrency"],
                    *(f"{latency[k]:.1f}" for k in ("p50_ms", "p95_ms", "p99_ms")),
                    f"{row['throughput_rps']:.1f}",
                    ", ".join(f"{k} {v}" for k, v in row["errors"].items()) or "none",
                )
            )
    return rows


def _resource_rows(sizes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for size in sizes:
        disk, seconds, memory = size["disk_bytes"], size["write_seconds"], size["memory"]
        rows.append(
            (
                f"{size['chunks']:,}",
                f"{size['documents']:,}",
                f"{memory['after start']['rss_mib']:.0f}",
                f"{memory['after load']['peak_rss_mib']:.0f}",
                _anon(memory["after load"]),
                f"{size.get('writer_peak_rss_mib', 0):.0f}",
                _writer_parts(size),
                *(f"{disk.get(part, 0) / MIB:.0f}" for part in ("vectors", "lexical", "manifest")),
                *(f"{seconds.get(p, 0.0):.0f}" for p in ("vectors", "lexical", "manifest")),
                f"{seconds.get('vector index (HNSW)', 0.0):.0f}",
                f"{size['write_total_s']:.0f}",
                f"{size['ready_s']:.0f}",
                f"{size['recall_at_10']['none']:.3f}",
                f"{size['recall_at_10']['1% scope']:.3f}",
            )
        )
    return rows


def _writer_parts(size: dict[str, Any]) -> str:
    phases = (size.get("writer_peak_parts_mib_by_phase") or {}).values()
    if not phases:
        return "—"
    return f"{max(p['anon'] for p in phases)} / {max(p['file'] for p in phases)}"


def _anon(memory: dict[str, float]) -> str:
    return f"{memory['anon_mib']:.0f}" if "anon_mib" in memory else "—"


def scale_targets(size: dict[str, Any]) -> list[dict[str, Any]]:
    """docs/targets.md's targets at 1M chunks (embedded, this machine)."""
    plain = _latency(size, "none", 1)["latency_ms"]
    stack_gib = size["memory"]["after load"]["peak_rss_mib"] / 1024
    writer_gib = size.get("writer_peak_rss_mib", 0) / 1024
    return [
        SCALE_P50.assess(round(plain["p50_ms"], 1)),
        SCALE_P99.assess(round(plain["p99_ms"], 1)),
        SCALE_STACK_RSS.assess(round(stack_gib, 2), _stack_note(size)),
        SCALE_WRITER_RSS.assess(round(writer_gib, 2), _writer_split(size)),
        SCALE_RECALL.assess(size["recall_at_10"]["none"]),
    ]


def _stack_note(size: dict[str, Any]) -> str:
    notes = (_split(size["memory"]["after load"]), capped_note(size))
    return "; ".join(note for note in notes if note)


def _split(memory: dict[str, float]) -> str:
    if "anon_mib" not in memory:
        return ""
    return f"now {memory['anon_mib'] / 1024:.2f} GiB own (anonymous) memory, the rest file pages"


def _writer_split(size: dict[str, Any]) -> str:
    """The writer's largest own (anonymous) and file-page peaks over its phases,
    and the hard limit it ran under, if any."""
    phases = size.get("writer_peak_parts_mib_by_phase") or {}
    if not phases:
        return ""
    anon = max(p["anon"] for p in phases.values()) / 1024
    mapped = max(p["file"] for p in phases.values()) / 1024
    split = (
        f"own (anonymous) memory peaked at {anon:.2f} GiB, mapped store files at {mapped:.2f} GiB"
        " (pages the kernel can drop and read again)"
    )
    cap = size.get("writer_memory_cap")
    return f"{split}; {_cap_phrase(cap)}" if cap else split


def _cap_phrase(cap: dict[str, int]) -> str:
    outcome = "killed for want of memory" if cap["oom_kills"] else "completed"
    return (
        f"written and built under a hard {cap['limit_mib']} MiB limit (a memory cgroup; the "
        f"{cap['held_at_entry_mib']} MiB it held on entry counted in full): {outcome}, peak "
        f"{cap['peak_mib']} MiB, the kernel reclaiming at the limit {cap['limit_hits']:,} times"
    )


def build_mode(size: dict[str, Any]) -> str:
    """How the record's HNSW index was built (bench.scale --optimize-apart /
    --optimize-each-run); records from before those flags built it in the
    writer, once."""
    where = "a child process on a shard copy" if size.get("optimize_apart") else "the writer"
    if not size.get("optimize_each_run"):
        return f"in {where}, once after the last run"
    builds = size.get("optimizations")
    counted = f", {builds} build{'' if builds == 1 else 's'}" if builds is not None else ""
    return (
        f"in {where}, asked after every run as the Indexer asks (deferred while runs come, "
        f"settled after the last){counted}"
    )


def _child_peak(size: dict[str, Any]) -> str:
    peak = size.get("optimizer_child_peak_rss_mib")
    return f"{peak:,}" if peak else "–"


def _cap_rows(sizes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for size in sizes:
        cap = size.get("writer_memory_cap")
        if cap:
            seconds = size["write_seconds"]
            rows.append(
                (
                    f"{size['chunks']:,}",
                    build_mode(size),
                    cap["limit_mib"],
                    cap["held_at_entry_mib"],
                    cap["peak_mib"],
                    f"{cap['limit_hits']:,}",
                    cap["oom_kills"],
                    _child_peak(size),
                    f"{seconds.get('vector index (HNSW)', 0.0):.0f}",
                    f"{size['write_total_s']:.0f}",
                )
            )
    return rows


def _cap_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = _cap_rows(sizes)
    if not rows:
        return []
    return [
        "### The writer under a hard memory limit\n",
        "`--writer-memory-cap`: each index was written and built inside a memory cgroup "
        "(`bench/common/memory_cap.py`). The limit covers the writer's own memory and the store "
        "files it maps; what it held on entry counts in full. At the limit the kernel drops "
        "mapped pages (read again when needed) and kills the process if its own memory alone "
        "outgrows it, so a completed build is one that fits a machine with that much memory. "
        "Peak RSS in the table above is then bounded by the limit too. A child process the "
        "writer starts (the optimizer, built apart) runs inside the same limit.\n",
        table(
            (
                "chunks",
                "HNSW built",
                "limit MiB",
                "held on entry MiB",
                "peak MiB",
                "reclaims at the limit",
                "OOM kills",
                "optimizer child peak RSS MiB",
                "HNSW build s",
                "build total s",
            ),
            rows,
        ),
    ]


def _probe_rows(sizes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for size in sizes:
        probe = size.get("search_during_load")
        if not probe:
            continue
        during = [row for row in probe["rows"] if not row.get("settled")]
        settled = [row for row in probe["rows"] if row.get("settled")]
        if not during or not settled:
            continue
        most = max(during, key=lambda row: row["unindexed"])
        slowest = max(during, key=lambda row: row["search_p50_ms"]["none"])
        rows.append(
            (
                f"{size['chunks']:,}",
                len(during),
                f"{most['unindexed']:,} of {most['points']:,}",
                _p50_pair(most),
                f"{_p50_pair(slowest)} ({slowest['unindexed']:,} unindexed)",
                f"{settled[-1]['unindexed']:,}",
                _p50_pair(settled[-1]),
            )
        )
    return rows


def _p50_pair(row: dict[str, Any]) -> str:
    p50 = row["search_p50_ms"]
    return f"{p50['none']:.1f} / {p50['1% scope']:.1f}"


def _probe_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = _probe_rows(sizes)
    if not rows:
        return []
    return [
        "### The vector search while the load runs\n",
        "`--probe-during-load RUNS`: every RUNS runs of the load, and once after its last build, "
        "the writer timed 30 vector searches per filter as a Retrieve's vector channel makes "
        "them (limit 50, the visibility filter, payloads read; store-level, in process: no "
        "model, no gRPC), p50 in ms, no filter / 1% scope. While builds are deferred "
        "(`services/storage/embedded/edge_optimizer.LOAD_BUILD_SHARE`) the points not yet "
        "indexed are searched exactly. `bench/scale/load_probe.py`.\n",
        table(
            (
                "chunks",
                "probes during the load",
                "most points unindexed",
                "search p50 then",
                "slowest probe p50",
                "unindexed after the load",
                "search p50 after the load",
            ),
            rows,
        ),
    ]


def scale_section(result: dict[str, Any]) -> str:
    sizes = sorted(result["sizes"], key=lambda s: s["chunks"])
    largest = sizes[-1]
    parts = [
        "## Scale: 10k to 1M chunks, embedded, on this machine\n",
        provenance(result),
        _about(largest),
        f"![Retrieve latency versus corpus size](../bench/results/{PLOT_FILE})\n",
        "### Retrieve latency (client-side, gRPC included, no rerank, query cache off)\n",
        table(
            ("chunks", "filter", "concurrency", "p50 ms", "p95 ms", "p99 ms", "req/s", "errors"),
            _latency_rows(sizes),
        ),
        "### Memory, disk, write time and recall\n",
        table(
            (
                "chunks",
                "documents",
                "RSS idle MiB",
                "peak RSS MiB",
                "own (anonymous) MiB after load",
                "writer peak RSS MiB",
                "writer peak own / file-page MiB",
                "vectors MiB",
                "lexical MiB",
                "manifest MiB",
                "write vectors s",
                "write lexical s",
                "write manifest s",
                "HNSW build s",
                "build total s",
                "start-up s",
                "recall@10",
                "recall@10, 1% scope",
            ),
            _resource_rows(sizes),
        ),
        *_cap_table(sizes),
        *capped_table(sizes),
        *_probe_table(sizes),
    ]
    if largest["chunks"] >= 1_000_000:
        parts += ["### Targets at 1M chunks\n", targets_table(scale_targets(largest))]
    return "\n".join(parts)


def _about(size: dict[str, Any]) -> str:
    corpus = size["corpus"]
    locales = ", ".join(f"{k} {v:.1%}" for k, v in size["locale_shares"].items())
    return (
        f"Synthetic corpora made of {corpus['source_chunks']:,} real chunks "
        f"({corpus['source_documents']:,} documents: SciFact chunked as the Indexer chunks it, "
        "and the bilingual set's Chinese pages), as `bench/scale/corpus.py` describes: each "
        "synthetic document copies a real one under a new id; each chunk's vector is its real "
        "vector moved towards one of its 10 nearest real neighbours plus Gaussian noise, "
        "calibrated so a copy's median cosine to its source "
        f"({corpus['source_cosine_median']:.3f}) "
        "equals the median cosine of a real chunk to the nearest chunk of another real document "
        f"({corpus['real_neighbour_cosine_median']:.3f}); its text is the real text with the last "
        "sentence taken from that neighbour. Scopes follow a Zipf distribution over "
        f"{corpus['spec']['scopes']} sections (largest {size['largest_scope_share']:.1%}); the "
        f"filtered runs ask for `{corpus['filter_scope']}`, {size['filter_share']:.2%} of the "
        f"{size['chunks']:,}-chunk corpus. Locales: {locales}. Written into a fresh index with the "
        "Indexer's write protocol (intents, vector rows, lexical rows, manifest commit; 500 "
        f"documents a run), the HNSW index built {build_mode(size)}; embedding is not timed "
        "(vectors are synthesised). "
        "Served by `python -m services.stack`; the load is the 300 SciFact test queries, each "
        "Retrieve embedding its query; recall@10 compares the vector store's search (limit 50, "
        "the `hnsw_ef` the store asks for at that size: 256 up to 100,000 chunks, growing above "
        "(`services/storage/base.SearchEf`; 1,020 at a million), the visibility filter every "
        "Retrieve carries) with exact search over the same points.\n"
    )


def scale_plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(result["sizes"], key=lambda s: s["chunks"])
    chunks = [size["chunks"] for size in sizes]
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for scope, concurrency, style in (("none", 1, "-"), ("1% scope", 1, "--"), ("none", 16, ":")):
        for key, marker in (("p50_ms", "o"), ("p99_ms", "^")):
            values = [_latency(size, scope, concurrency)["latency_ms"][key] for size in sizes]
            label = f"{key[:3]}, {'no filter' if scope == 'none' else scope}, c={concurrency}"
            ax.plot(chunks, values, style, marker=marker, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index (log scale)")
    ax.set_ylabel("Retrieve latency at the client, ms (log scale)")
    ax.set_title("Retrieve latency versus corpus size (embedded, 2 cores, no rerank)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
