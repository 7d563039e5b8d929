"""The benchmark page's section on the Reranker's scoring speed per backend
(`python -m bench.load.reranker`): torch against ONNX Runtime fp32 and int8,
and how far the ONNX paths move the scores."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "reranker.json"
REFERENCE = "torch"
# Labels of bench.load.reranker.CONFIGS as the page names them.
NAMES = {
    "torch": "torch",
    "onnx": "ONNX fp32",
    "onnx-int8": "ONNX int8",
    "onnx-int8 spin": "ONNX int8, spinning threads",
}
HEADERS = (
    "backend",
    "passages per call",
    "calls",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "p50 ms per passage",
    "pairs/s",
    "p50 speed-up vs torch",
)


def reranker_section(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Reranker: torch vs ONNX Runtime (fp32, int8)\n",
            provenance(result),
            _about(result),
            table(HEADERS, _latency_rows(result)),
            _overall(result),
            "### Score drift against torch\n",
            _drift(result),
            "### Which backend the service uses\n",
            _default(result),
        ]
    )


def _name(label: str) -> str:
    return NAMES.get(label, label)


def _about(result: dict[str, Any]) -> str:
    config = result["config"]
    weights = (
        "the encoder weights of the packaged all-MiniLM-L6-v2 (trained, so activations and "
        "int8 rounding behave like a real model's) under a seeded random one-logit head"
        if config.get("weights") == "packaged"
        else "seeded random weights throughout"
    )
    sizes = ", ".join(str(n) for n in config["sizes"])
    tokens = config.get("tokens_per_pair")
    token_note = (
        f" ({tokens['mean']:.0f} tokens per (query, passage) pair on average, "
        f"{tokens['min']}-{tokens['max']})"
        if tokens
        else ""
    )
    rounds = config["rounds"]
    after = result.get("load_average_1m_after")
    after_note = f" The 1-minute load average at the end was {after}." if after is not None else ""
    machine = result["machine"]
    busiest = max(machine["load_average_1m"], after or 0)
    if busiest > machine["logical_cpus"]:
        after_note += (
            f" That is more than the {machine['logical_cpus']} CPUs: other work shared the "
            "machine during the run, so these latencies are inflated and widely spread; "
            "compare the backends with each other, not with other sections."
        )
    return (
        "A cross-encoder of the shape of ms-marco-MiniLM-L6-v2 "
        f"({config['architecture'].removesuffix(' (MiniLM-L6)')}), "
        f"built for the run with {weights}. No pretrained cross-encoder can be installed here, "
        "and speed does not depend on what the weights learned, so the latencies are real and "
        "the scores meaningless. Each backend scores through `CrossEncoderScorer.score`, the "
        "service's own code path (tokenization, batching, activation; in-process, no gRPC), "
        f"one query against {sizes} passages of {config['passage_chars']} characters each"
        f"{token_note}, in model batches of {config['batch_size']}, max length "
        f"{config['max_length']} tokens. {rounds} round{'s' if rounds != 1 else ''}; each "
        "scores every size once with every backend in turn, so a load change on the shared "
        "machine hits all backends alike. ONNX int8: "
        f"{config.get('onnx_int8', 'dynamic quantization')}; the spinning row lets ONNX "
        "Runtime's idle threads spin (`RAG_RERANK_ONNX_SPIN=true`; the service default is "
        f"passive waits).{after_note}\n"
    )


def _latency_rows(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    summary = result["results"]
    reference = summary.get(REFERENCE, {}).get("sizes", {})
    rows = []
    for label, row in summary.items():
        for size, stats in row["sizes"].items():
            base = reference.get(size)
            speedup = f"{base['p50_ms'] / stats['p50_ms']:.2f}x" if base else "—"
            rows.append(
                (
                    _name(label),
                    size,
                    stats["n"],
                    f"{stats['p50_ms']:.1f}",
                    f"{stats['p95_ms']:.1f}",
                    f"{stats['p99_ms']:.1f}",
                    f"{stats['p50_ms'] / int(size):.1f}",
                    f"{stats['pairs_per_s']:.1f}",
                    speedup,
                )
            )
    return rows


def _overall(result: dict[str, Any]) -> str:
    summary, speedups = result["results"], result.get("speedup_vs_torch", {})
    load_s = result.get("load_s", {})
    rows = [
        (
            _name(label),
            f"{row['pairs_per_s']:.1f}",
            f"{speedups[label]:.2f}x" if label in speedups else "—",
            f"{load_s[label]:.2f}" if label in load_s else "—",
        )
        for label, row in summary.items()
    ]
    reuse = (
        "; the spinning configuration finds the int8 export already there"
        if "onnx-int8 spin" in load_s
        else ""
    )
    return (
        "Over all sizes and rounds (load: building the scorer in a fresh cache directory, "
        f"the ONNX export and quantization included{reuse}):\n\n"
        + table(("backend", "pairs/s", "vs torch", "load s"), rows)
    )


def _drift(result: dict[str, Any]) -> str:
    drift = result["drift"]
    backends = [key for key, value in drift.items() if isinstance(value, dict)]
    rows = [
        (
            _name(backend),
            f"{drift[backend]['max_abs']:.3g}",
            f"{drift[backend]['mean_abs']:.3g}",
            f"{drift[backend]['spearman']:.3f}",
            "yes" if drift[backend]["same_top5"] else "no",
        )
        for backend in backends
    ]
    return (
        f"The same query against {drift['pairs']} other passages, raw logits of each ONNX path "
        f"against torch's; the torch scores' standard deviation is {drift['torch_score_std']:.3g}, "
        "the scale the differences are to be read against. The head is random, so the scores "
        "spread far less than a trained cross-encoder's; rank agreement under int8 here says "
        "how the rounding compares with that narrow spread, not how a trained model would "
        "rank.\n\n"
        + table(
            ("backend", "max abs diff", "mean abs diff", "Spearman vs torch", "same top-5"), rows
        )
    )


def _default(result: dict[str, Any]) -> str:
    defaults = result.get("service_defaults")
    if not defaults:
        return "The run did not record the service's defaults.\n"
    backend = defaults["rerank_backend"]
    summary = result["results"]
    lines = [
        f"`RAG_RERANK_BACKEND` defaults to `{backend}` (services/reranker/settings.py): the "
        "sentence-transformers CrossEncoder as loaded, with no export step; its scores are the "
        "reference the ONNX paths are compared with above. docs/targets.md asks for ONNX Runtime, "
        "optionally int8, as a faster path selectable by configuration: "
        "`RAG_RERANK_BACKEND=onnx` or `onnx-int8` (exported once into `RAG_RERANK_CACHE_DIR`)."
    ]
    if backend in summary and "onnx-int8" in summary and backend != "onnx-int8":
        ratio = summary["onnx-int8"]["pairs_per_s"] / summary[backend]["pairs_per_s"]
        lines.append(
            f" In this run int8 scored {ratio:.2f}x the default's pairs/s, at the drift above."
        )
    lines.append("\n\n" + _budget(result, defaults))
    return "".join(lines)


def _budget(result: dict[str, Any], defaults: dict[str, Any]) -> str:
    """docs/targets.md sets no latency target for the Reranker alone; the Retriever's
    default budget is the figure scoring has to fit."""
    candidates, budget = defaults.get("rerank_candidates"), defaults.get("rerank_budget_ms")
    intro = (
        "docs/targets.md sets no latency target for the Reranker by itself; its reranking target "
        "(never push a response past the caller's deadline) is measured through `Retrieve` in "
        "the speed section."
    )
    if candidates is None or budget is None:
        return intro + "\n"
    key = str(candidates)
    fits = []
    for label, row in result["results"].items():
        stats = row["sizes"].get(key)
        if stats is None:
            continue
        p50 = stats["p50_ms"]
        verdict = (
            f"fits with {budget - p50:.0f} ms to spare"
            if p50 <= budget
            else f"over by {p50 - budget:.0f} ms ({(p50 - budget) / budget:.0%})"
        )
        fits.append(f"{_name(label)} {p50:.0f} ms, {verdict}")
    if not fits:
        return (
            intro + f" The Retriever sends {candidates} candidates with a {budget} ms budget; "
            f"this run did not measure {candidates} passages per call.\n"
        )
    return (
        intro + f" The Retriever's defaults send the top {candidates} candidates "
        f"(`RAG_RERANK_CANDIDATES`) with a {budget} ms budget (`RAG_RERANK_BUDGET_MS`); "
        f"scoring {candidates} passages, p50: " + "; ".join(fits) + ". What does not fit is "
        "scored in part and the rest keeps the fused order.\n"
    )


PACKAGED_LATENCY_FILE = "reranker_packaged.json"


def packaged_rerank_section(fits: list[dict[str, Any]], latency: dict[str, Any] | None) -> str:
    """The packaged cross-encoder (and the ColBERT probe) against fusion alone
    (bench.eval.rerank_fit), and its cost per call (bench.load.packaged_reranker)."""
    lines = [
        "## Rerank blend: packaged cross-encoder and ColBERT vs fusion alone",
        "",
        "Candidates: the first N of `Retrieve` (hybrid, rerank off) kept by "
        "`python -m bench.eval.rerank_candidates --queries 120 --filler-docs 450` (SciFact, "
        "the 120 queries of each split with the lowest sha1 of their ids, an index of their "
        "judged documents plus 450 others). Blend fitted on the train queries only; the "
        "test rows use the constants chosen on train. A subset, on a 2-core machine shared "
        "with other work (load average 15-20): read the differences, not the absolute times.",
        "",
        "| scorer | tokens | candidates | queries | split | order | nDCG@10 | MRR@10 | hit@1 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for fit in fits:
        head = f"| {fit['model']} | {fit['max_length']} | {fit['candidates']} "
        test = fit["test"]
        train = fit["train"]
        rows = [
            ("train", "fused", train["fused"]),
            ("train", "blend (chosen)", train["chosen"]),
            ("test", "fused", test["fused"]),
            ("test", "scorer alone", test["cross_encoder_only"]),
            ("test", "blend", test["blend"]),
        ]
        for split, order, m in rows:
            lines.append(
                f"{head}| {test['queries']} | {split} | {order} | {m['ndcg@10']:.4f} "
                f"| {m['mrr@10']:.4f} | {m['hit@1']:.2f} |"
            )
        chosen = fit["chosen"]
        lines.append(
            f"| ↳ chosen: fused weight {chosen['fused_weight']}, scorer weight "
            f"{chosen['rerank_weight']}, k {chosen['k']}; scoring "
            f"{fit['scoring_ms_per_pair']} ms/pair in process | | | | | | | | |"
        )
    lines += ["", f"Commands and revisions: {', '.join(f['command'] for f in fits)}."]
    if latency is not None:
        lines += _packaged_latency(latency)
    return "\n".join(lines) + "\n"


def _packaged_latency(latency: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"### Cost per call of {latency['model']} (interleaved rounds)",
        "",
        f"`{latency['command']}` at {latency['git_revision']} on {latency['date']}, "
        f"load average {latency['load_average_1m']:.1f} on 2 cores: "
        "compare the ratios between lengths; the absolute times are a loaded machine's.",
        "",
        "| tokens | candidates | p50 ms | p95 ms | n |",
        "| --- | --- | --- | --- | --- |",
    ]
    for length, sizes in latency["ms"].items():
        for size, m in sizes.items():
            lines.append(f"| {length} | {size} | {m['p50_ms']} | {m['p95_ms']} | {m['n']} |")
    return lines
