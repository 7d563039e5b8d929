"""The third-party documentation section of docs/benchmarks.md, rendered
from bench/results/third_party.json (written by `python -m
bench.eval.third_party`): hit@1, top 3, MRR@10 and nDCG@10 per configuration
on the test split (the figures of record), then all queries, then the test
questions whose first page is not a relevant one."""

from __future__ import annotations

import json
from typing import Any

from bench.common.paths import DATASETS_DIR
from bench.reports.markdown import provenance, table, targets_table

RESULTS_FILE = "third_party.json"
METRICS = ("hit@1", "top3", "mrr@10", "ndcg@10")
HEADERS = ("hit@1", "top 3", "MRR@10", "nDCG@10")

ABOUT = """Developer questions over real third-party documentation, written without the
answer's own identifiers ("freeze some arguments of a function to get a new callable" for
`functools.partial`): bench/datasets/third_party ({queries}). The pages are the corpus
suite's (scripts/fetch_doc_corpus.py: Debian's Python reference and git manual, npm's docs,
eslint-plugin-import and markdownlint READMEs and rule pages, and the Chinese pages of the
suite as distractors), one rendering per page: {pages} pages in the index ({judged} judged,
{distractors} sampled deterministically from the rest, at most {max_kb} KB each;
{by_source}). Every query goes through `Retrieve` with top 10 and one chunk per document;
scored at document level. The train split is for fitting (rules, weights); the test split
is the figure of record.
"""


def third_party_section(result: dict[str, Any]) -> str:
    selection, index = result["selection"], result["index"]
    about = ABOUT.format(
        queries=", ".join(f"{n} {split}" for split, n in result["queries"].items()),
        pages=index["documents"],
        judged=selection["judged_pages"],
        distractors=selection["distractor_pages"],
        max_kb=selection["max_distractor_bytes"] // 1000,
        by_source=", ".join(f"{s} {n}" for s, n in selection["pages_by_source"].items()),
    )
    built = "reused" if index["reused"] else f"built in {index['seconds']} s"
    settings = ", ".join(f"`{k}={v}`" for k, v in result["env"].items()) or "server defaults"
    if inherited := result.get("inherited_env"):
        shell = ", ".join(f"`{k}={v}`" for k, v in inherited.items())
        settings += f" (and from the calling shell: {shell})"
    return "\n".join(
        [
            "## Quality: developer questions over third-party documentation\n",
            about,
            provenance(result),
            f"Settings: {settings}. Index: {index['chunks']} chunks, model "
            f"{index['embedding_model']}, lexical {index['lexical_backend']}; this run: {built}.\n",
            table(("configuration", "queries", *HEADERS, "p50 ms"), rows(result)),
            targets_table(result["targets"]),
            misses(result),
        ]
    )


def rows(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    for label, split in (("test split", "test"), ("all queries", "all")):
        for name, config in result["configs"].items():
            figures = config[split]
            p50 = config["latency"]["p50_ms"]
            found.append((name, label, *(figures.get(m, "—") for m in METRICS), p50))
    blanks = [""] * (len(METRICS) + 1)
    found += [
        (name, f"not measured: {why}", *blanks) for name, why in result["not_measured"].items()
    ]
    return found


def misses(result: dict[str, Any]) -> str:
    """The test questions whose rank-1 page is not judged relevant (hybrid)."""
    path = DATASETS_DIR / "third_party" / "queries.jsonl"
    if "hybrid" not in result["configs"] or not path.is_file():
        return ""
    lines = path.read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line) for line in lines if line.strip()]
    rank1 = result["configs"]["hybrid"].get("rank1", {})
    body = [
        (q["id"], q["query"], ", ".join(q["relevant"]), rank1.get(q["id"]) or "nothing")
        for q in queries
        if q["split"] == "test" and rank1.get(q["id"]) not in q["relevant"]
    ]
    header = f"### Misses at rank 1 (hybrid, test split): {len(body)}\n"
    return header + "\n" + table(("id", "question", "relevant", "rank-1 page"), body)
