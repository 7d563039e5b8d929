"""The targets of docs/targets.md and how a measurement
compares with them. The report shows every figure next to its target and
says by how much a missed one falls short."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Direction = Literal["at_least", "at_most"]


@dataclass(frozen=True)
class Target:
    what: str
    threshold: float
    direction: Direction
    unit: str = ""
    source: str = "docs/targets.md"

    def assess(self, measured: float | None, note: str = "") -> dict[str, Any]:
        """The target with the measurement, whether it is met and the gap."""
        entry: dict[str, Any] = {**asdict(self), "measured": measured, "note": note}
        if measured is None:
            return {**entry, "met": None, "gap": None, "verdict": "not measured"}
        if self.direction == "at_least":
            met, gap = measured >= self.threshold, measured - self.threshold
        else:
            met, gap = measured <= self.threshold, self.threshold - measured
        verdict = "met" if met else f"missed by {_amount(abs(gap), self)}"
        return {**entry, "met": met, "gap": round(gap, 4), "verdict": verdict}

    @property
    def label(self) -> str:
        sign = "≥" if self.direction == "at_least" else "≤"
        return f"{sign} {self.threshold:g}{self.unit}"


def _amount(gap: float, target: Target) -> str:
    if not target.threshold:
        return f"{gap:.4g}{target.unit}"
    relative = gap / target.threshold * 100
    return f"{gap:.4g}{target.unit} ({relative:.{1 if relative < 10 else 0}f}% of the target)"


# docs/targets.md, "Quality" and "Speed". The speed targets are ratios measured
# in one run on one machine, so they hold on any machine the bench runs on.
HYBRID_NDCG = Target("hybrid nDCG@10 through Retrieve, SciFact test", 0.74, "at_least")
RETRIEVE_P50_RATIO = Target(
    "Retrieve p50 without reranking, warm, concurrency 1 / the query embedding alone, p50",
    1.5,
    "at_most",
    "×",
)
RETRIEVE_P50_RATIO_AIM = Target(
    "Retrieve p50 / the query embedding alone, the aim", 1.2, "at_most", "×"
)
THROUGHPUT_SHARE = Target(
    "Retrieve throughput at concurrency 16 / embedding-bound throughput", 0.85, "at_least"
)
INDEXING_RATE = Target(
    "indexing with the default model, SciFact chunks", 35.0, "at_least", " chunks/s"
)
RERANK_P50 = Target("Retrieve p50 with reranking, concurrency 1", 250.0, "at_most", " ms")
INDEXING_SHARE = Target("indexing throughput / raw encoder throughput", 0.85, "at_least")
RERANK_LATE = Target("responses past the caller's deadline with reranking", 0.0, "at_most")
ISOLATION = "issue 15, item 5"
DEGRADED = Target("Retrieve answers degraded while an ingest runs", 0, "at_most", source=ISOLATION)
P99_RATIO = Target(
    "Retrieve p99 while an ingest runs / idle p99, same paced clients",
    3.0,
    "at_most",
    source=ISOLATION,
)

# The bilingual identifier / Chinese evaluation (bench.eval.bilingual).
BILINGUAL = "the bilingual evaluation's brief"
IDENTIFIER_EXACT = Target(
    "identifier queries (identifier + identifier_sentence), hybrid: the identifier in the "
    "rank-1 chunk (exact@1)",
    1.0,
    "at_least",
    source="docs/targets.md",
)
# docs/targets.md's target: Chinese questions, including those answered only by
# English pages (it was 0.90 while the vector channel read English only).
ZH_TOP3 = Target(
    "zh_question, hybrid: a relevant chunk within the top 3", 0.95, "at_least", source=BILINGUAL
)
ZH_LEXICAL = Target(
    "Chinese queries whose characters all occur in the corpus, lexical: the channel returns hits",
    1.0,
    "at_least",
    source=BILINGUAL,
)
# Cross-language queries (a question answered only by pages in the other
# language): each direction on its own, so one cannot hide the other.
CROSS_LANGUAGE = 'issue 25 ("Done when")'
CROSS_ZH_EN_TOP3 = Target(
    "cross_zh_en (Chinese question, answer only on English pages), hybrid: a relevant chunk "
    "within the top 3",
    0.80,
    "at_least",
    source=CROSS_LANGUAGE,
)
CROSS_EN_ZH_TOP3 = Target(
    "cross_en_zh (English question, answer only on Chinese pages), hybrid: a relevant chunk "
    "within the top 3",
    0.80,
    "at_least",
    source=CROSS_LANGUAGE,
)

# The int8 document encoder (RAG_EMBEDDING_DOCUMENT_PRECISION=int8).
DOCUMENT_ENCODER = "the int8 document encoder's brief"
INT8_DOCUMENT_SPEEDUP = Target(
    "int8 document encoder chunks/s / fp32 ONNX chunks/s (Embedder.embed_documents, SciFact "
    "chunks)",
    1.8,
    "at_least",
    "×",
    source=DOCUMENT_ENCODER,
)
INT8_DOCUMENT_NDCG = Target(
    "|hybrid nDCG@10 with int8 documents − with fp32 documents|",
    0.005,
    "at_most",
    source=DOCUMENT_ENCODER,
)

# Developer questions over third-party documentation (bench.eval.third_party):
# the answer first. Issue 34 expects it with the reranker; fusion alone is
# assessed beside it so the gap the reranker must close is on the page.
THIRD_PARTY_HIT1 = Target(
    "third-party documentation questions: a relevant page at rank 1 (hit@1)",
    0.75,
    "at_least",
    source='issue 34 ("Done when")',
)

# docs/targets.md's row for 1 M chunks (embedded, c=1), one target per figure.
SCALE_P50 = Target("Retrieve p50 at 1 M chunks, c=1, no rerank", 20.0, "at_most", " ms")
SCALE_P99 = Target("Retrieve p99 at 1 M chunks, c=1, no rerank", 50.0, "at_most", " ms")
SCALE_STACK_RSS = Target("stack peak RSS at 1 M chunks", 4.0, "at_most", " GiB")
SCALE_WRITER_RSS = Target("bulk-load writer peak RSS", 4.0, "at_most", " GiB")
SCALE_RECALL = Target("vector channel recall@10 against exact search", 0.98, "at_least")


def speed_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`bench.load.speed`'s figures against docs/targets.md's speed targets."""
    rows = {(r["mode"], r["concurrency"]): r for r in result["retrieve"]}
    p50 = rows[("no rerank", 1)]["latency"]["p50_ms"]
    c16 = rows[("no rerank", 16)]["throughput_rps"]
    models = (result["embedding"], result["embedding_after_retrieve"])
    # The faster of the two model-alone measurements: the stricter bound.
    embedding_p50 = min(m["query_ms"]["p50_ms"] for m in models)
    bound = max(m["bound_qps"] for m in models)
    ratio_note = f"{p50} ms vs {embedding_p50} ms for the query embedding alone"
    ratio = round(p50 / embedding_p50, 2)
    late = sum(d["late"] + d["deadline_exceeded"] for d in result["deadline_check"])
    reranked = [r for (mode, _), r in rows.items() if mode == "rerank"]
    late += sum(r["errors"].get("DEADLINE_EXCEEDED", 0) for r in reranked)
    indexing = result["indexing"]
    rerank_p50 = rows.get(("rerank", 1), {}).get("latency", {}).get("p50_ms")
    return [
        RETRIEVE_P50_RATIO.assess(ratio, ratio_note),
        RETRIEVE_P50_RATIO_AIM.assess(ratio, ratio_note),
        THROUGHPUT_SHARE.assess(
            round(c16 / bound, 3),
            f"{c16} requests/s vs {bound} queries/s embedded one at a time by the model alone",
        ),
        INDEXING_SHARE.assess(indexing["share"], "chunks/s vs raw encoder chunks/s"),
        INDEXING_RATE.assess(indexing["chunks_per_s"], "through the Indexer, best of its runs"),
        RERANK_P50.assess(rerank_p50, "the served reranker, the Retriever's defaults"),
        RERANK_LATE.assess(late, "late answers + DEADLINE_EXCEEDED, the served reranker"),
    ]


def isolation_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`bench.load.ingest_isolation`'s figures against its two targets."""
    idle, during = result["idle"], result["during_ingest"]
    idle_p99 = idle["latency"]["p99_ms"]
    ratio = round(during["latency"]["p99_ms"] / idle_p99, 2) if idle_p99 else None
    return [
        DEGRADED.assess(
            during["degraded"], f"of {during['requests']} answers; idle: {idle['degraded']}"
        ),
        P99_RATIO.assess(
            ratio, f"{during['latency']['p99_ms']} ms during the ingest vs {idle_p99} ms idle"
        ),
    ]
