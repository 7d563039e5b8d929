"""The quality section of a BEIR-layout evaluation (`python -m
bench.eval.scifact`, SciFact by default): metrics per configuration next to the
peer's, the index and request it was measured with, and the settings fitted on
the train split."""

from __future__ import annotations

from typing import Any

from bench.reports.finetune import finetune_section
from bench.reports.markdown import provenance, table, targets_table
from bench.reports.targets import HYBRID_NDCG, INT8_DOCUMENT_NDCG

FINETUNED = "MiniLM fine-tuned on train"
INT8_DOCUMENTS = "hybrid, int8 document encoder"
METRICS = ("ndcg@10", "recall@100", "mrr@10", "hit@1", "top3", "hit_rate@5", "precision@5")
METRIC_HEADERS = ("nDCG@10", "Recall@100", "MRR@10", "hit@1", "top 3", "hit rate@5", "P@5")


def quality_section(result: dict[str, Any]) -> str:
    title = f"## Quality: {result['dataset']}, {result['split']} split"
    return "\n".join(
        [
            f"{title} ({result['queries']} queries)\n",
            provenance(result),
            table(("configuration", *METRIC_HEADERS, "p50 ms", "p95 ms"), quality_rows(result)),
            index_note(result),
            int8_documents_note(result),
            models_note(result),
            fit_section(result),
            finetune_section(result),
            peer_section(result),
            "### Quality targets\n",
            targets_table(scifact_targets(result)),
            "Levers measured on the train split to close a quality gap (fusion variants, "
            "channel weights, depths, cosine floor, chunk sizes) and the noise of this test "
            "split: [quality.md](quality.md).\n",
        ]
    )


def quality_rows(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One row per configuration, the peer last: quality and latency side by side."""
    measured = list(result["configs"].items())
    if "finetuned" in result:
        finetuned = result["finetuned"]["configs"]
        measured += [(f"{name}, {FINETUNED}", values) for name, values in finetuned.items()]
    if "hybrid" in result.get("int8_documents", {}).get("configs", {}):
        measured.append((INT8_DOCUMENTS, result["int8_documents"]["configs"]["hybrid"]))
    for model, other in result.get("models", {}).items():
        name = model.removeprefix("packaged:")
        measured += [(f"{config}, {name}", v) for config, v in other.get("configs", {}).items()]
        if "hybrid" in other.get("int8_documents", {}).get("configs", {}):
            int8 = other["int8_documents"]["configs"]["hybrid"]
            measured.append((f"hybrid, {name}, int8 document encoder", int8))
    if "metrics" in result["peer"]:
        peer = result["peer"]
        measured.append(("peer: Haystack hybrid", {**peer["metrics"], "latency": peer["latency"]}))
    rows: list[tuple[Any, ...]] = [
        # "—": a result recorded before that metric was (hit@1 and top 3 came later).
        (name, *(v.get(m, "—") for m in METRICS), v["latency"]["p50_ms"], v["latency"]["p95_ms"])
        for name, v in measured
    ]
    blanks = [""] * (len(METRICS) + 1)
    rows += [
        (name, f"not measured: {why}", *blanks) for name, why in result["not_measured"].items()
    ]
    return rows


def models_note(result: dict[str, Any]) -> str:
    """Where the rows of another embedding model come from: their own run."""
    notes = []
    for model, other in result.get("models", {}).items():
        if "command" not in other:
            continue
        index, chunking = other["index"], other["chunking"]
        notes.append(
            f"Rows `…, {model.removeprefix('packaged:')}`: {model} in an index of its own "
            f"({chunking['chunks']} chunks, {chunking['version']}, built in {index['seconds']} s, "
            f"{index.get('chunks_per_s')} chunks/s on a shared machine), same requests; measured "
            f"by `{other['command']}`, {other['date']}, revision `{other['git_revision']}`, "
            f"1-minute load average at the start {other['machine']['load_average_1m']} (its "
            "latencies are not comparable with the rows above: other runs shared the machine).\n"
        )
    return "\n".join(notes)


def index_note(result: dict[str, Any]) -> str:
    chunking, index, request = result["chunking"], result["index"], result["request"]
    built = (
        "reused (every document unchanged)"
        if index["reused"]
        else f"built in {index['seconds']} s ({index.get('docs_per_s')} docs/s)"
    )
    return (
        f"Index: {chunking['documents']} documents, {chunking['chunks']} chunks (target "
        f"{chunking['target_chars']} chars, overlap {chunking['overlap_chars']}, max "
        f"{chunking['max_chars']}, {chunking['version']}), title as heading: "
        f"{chunking['title_as_heading']}, model {chunking['embedding_model']}; this run: {built}. "
        f"Requests: top_k {request['top_k']}, {request['max_chunks_per_document']} chunk per "
        f"document, {request['candidates_per_channel']} candidates per channel; server settings "
        f"{request['server_settings']}. Latency: one query at a time at the client, gRPC "
        "included, query cache off.\n" + rejected_note(index)
    )


def int8_documents_note(result: dict[str, Any]) -> str:
    """What encoding the documents in int8 did to hybrid nDCG@10, against its target."""
    int8 = result.get("int8_documents")
    if int8 is None:
        return ""
    target = next(t for t in scifact_targets(result) if t["what"] == INT8_DOCUMENT_NDCG.what)
    if target["measured"] is None:
        return f"`{INT8_DOCUMENTS}`: not measured ({target['note']}).\n"
    index = int8["index"]
    built = (
        "reused (every document unchanged)"
        if index["reused"]
        else f"built in {index['seconds']} s, {index.get('chunks_per_s')} chunks/s"
    )
    return (
        f"`{INT8_DOCUMENTS}`: the same requests on an index of its own ({built}; document "
        f"encoders {', '.join(int8['chunking']['document_encoders']) or 'unrecorded'}) whose "
        "documents the Indexer encoded with `RAG_EMBEDDING_DOCUMENT_PRECISION=int8`; queries "
        f"are encoded in fp32 as always. hybrid nDCG@10 {int8['configs']['hybrid']['ndcg@10']:.4f}"
        f" against {result['configs']['hybrid']['ndcg@10']:.4f} with fp32 documents (the "
        f"`hybrid` row): a difference of {target['difference']:+.4f}; target |difference| "
        f"{INT8_DOCUMENT_NDCG.label}: {target['verdict']}.\n"
    )


def rejected_note(index: dict[str, Any]) -> str:
    rejected = index.get("rejected") or []
    if not rejected:
        return ""
    return (
        f"\nThe Indexer refused {len(rejected)} document(s), which therefore cannot be found; "
        f"{index['judgments_on_rejected']} relevance judgment(s) of this split point at them: "
        + "; ".join(f"`{line}`" for line in rejected)
        + "\n"
    )


def fit_section(result: dict[str, Any]) -> str:
    fit = result.get("fit")
    header = "### Settings fitted on the train split\n"
    if not fit:
        return header + "\nNone: the server's default BM25 field boosts were used.\n"
    chosen = fit["chosen"]["lexical_boosts"]
    rows = [
        (
            *(f"{point['lexical_boosts'][f]:g}" for f in ("title", "heading_path", "text")),
            point["lexical_ndcg@10"],
            point["hybrid_ndcg@10"],
            "chosen" if point["lexical_boosts"] == chosen else "",
        )
        for point in fit["grid"]
    ]
    headers = (
        "title boost",
        "heading boost",
        "text boost",
        "lexical nDCG@10 (train)",
        "hybrid nDCG@10 (train)",
        "",
    )
    return (
        f"{header}\nThe BM25 field boosts (`RAG_LEXICAL_*_BOOST`, applied at query time) were "
        f"chosen by `{fit['command']}` ({fit['date']}, revision `{fit['git_revision']}`) for the "
        f"best {fit['objective']}; the test split played no part in the choice.\n\n"
        + table(headers, rows)
    )


def peer_section(result: dict[str, Any]) -> str:
    peer = result["peer"]
    header = "### The peer: a Haystack hybrid pipeline\n"
    if "metrics" not in peer:
        return header + f"\nNot measured: {peer['not_measured']}\n"
    embedded = (
        "embeddings taken from the cache of an earlier run"
        if peer["embeddings_from_cache"]
        else f"embedded in {peer['embedding_seconds']} s"
    )
    versions = ", ".join(f"{k} {v}" for k, v in peer["versions"].items())
    return (
        f"{header}\n{peer['system']} ({versions}), in-process, over whole documents (title + "
        f"abstract): {peer['documents']} documents, {embedded}. Same model, queries, depth "
        f"({peer['depth']}) and metric code as above; one query at a time after one warm-up "
        "query, timed around `Pipeline.run`.\n"
    )


def scifact_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """SciFact's figures against docs/targets.md and the int8 encoder's brief,
    assessed when the page is written, so the page follows the targets."""
    split = f"{result['dataset']} {result['split']} split"
    model = result["chunking"]["embedding_model"]
    models = [(model, result["configs"])]
    if "finetuned" in result:
        models.append((f"{model} fine-tuned on the train split", result["finetuned"]["configs"]))
    targets = [
        HYBRID_NDCG.assess(configs.get("hybrid", {}).get("ndcg@10"), f"{split}, {model}")
        for model, configs in models
    ]
    if "int8_documents" in result:
        targets.append(assess_int8_documents(result, split))
    return targets


def assess_int8_documents(result: dict[str, Any], split: str) -> dict[str, Any]:
    """How far hybrid nDCG@10 moves when the documents are encoded in int8."""
    fp32 = result["configs"].get("hybrid", {}).get("ndcg@10")
    int8 = result["int8_documents"]["configs"].get("hybrid", {}).get("ndcg@10")
    if fp32 is None or int8 is None:
        return INT8_DOCUMENT_NDCG.assess(None, split)
    difference = round(int8 - fp32, 4)
    note = f"{split}: int8 {int8:.4f}, fp32 {fp32:.4f} (int8 − fp32 {difference:+.4f})"
    return {**INT8_DOCUMENT_NDCG.assess(abs(difference), note), "difference": difference}
