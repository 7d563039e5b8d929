"""Stage the bilingual Vue.js documentation site the `vue_docs` question set is judged on.

A real bilingual documentation site written for VitePress: the English guide
(vuejs/docs) and its Chinese translation (vuejs-translations/docs-zh-cn),
as Markdown with the generator's own syntax
(`{#anchor}` after every heading, `::: tip` containers, Vue components and
`<div class="options-api">` blocks in the prose). Which pages, from
bench/datasets/vue_docs/site.json: every page of its folders in both
languages, but for a few kept in one language only (so a question can have
its answer only in the other one). The API reference is left out: it
restates most guide pages in both languages, so no answer would exist in
one language only. Written as `pages/en/<path>` and
`pages/zh-CN/<path>`, the questions copied beside them, so the folder is a
dataset `python -m bench.eval.bilingual --dataset` reads:

    python scripts/stage_vue_docs_site.py --en <vuejs/docs clone> \\
        --zh <docs-zh-cn clone> --out .data/eval/vue-docs-site
    python -m bench.eval.bilingual --dataset .data/eval/vue-docs-site \\
        --out .data/eval/vue-docs-results --docs .data/eval/vue-docs-results/benchmarks.md

The two repositories come from GitHub, not from a package registry, so this
set is a measurement an operator repeats with clones of their own (a bare
mirror works: pages are read with `git show` at the pinned commits), not
part of `make eval`. The pages are never committed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

DATASET = Path(__file__).resolve().parents[1] / "bench" / "datasets" / "vue_docs"


def pages_at(repo: Path, commit: str, folders: list[str]) -> dict[str, bytes]:
    """Every Markdown page under `folders` at `commit`, by its path below `src/`."""
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", commit, *folders],
        capture_output=True, check=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    pages = {}
    for path in (p for p in listing if p.endswith(".md")):
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{commit}:{path}"],
            capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        pages[path.removeprefix("src/")] = shown.stdout
    return pages


def stage(clones: dict[str, Path], out: Path) -> dict[str, int]:
    """Write the site and the questions; returns the pages written per locale."""
    site = json.loads((DATASET / "site.json").read_text(encoding="utf-8"))
    left_out = {"en": set(site["zh_only"]), "zh-CN": set(site["en_only"])}
    shutil.rmtree(out, ignore_errors=True)
    written: dict[str, int] = {}
    for locale, repo in clones.items():
        source = site["sources"][locale]
        pages = pages_at(repo, source["commit"], site["folders"])
        missing = (set(site["en_only"]) | set(site["zh_only"])) - set(pages)
        if missing:
            raise SystemExit(
                f"{locale}: pages of site.json not at {source['commit']}: {sorted(missing)}"
            )
        kept = {path: body for path, body in pages.items() if path not in left_out[locale]}
        for path, body in kept.items():
            target = out / "pages" / locale / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
        written[locale] = len(kept)
    shutil.copy(DATASET / "queries.jsonl", out / "queries.jsonl")
    return written


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--en", type=Path, required=True, help="a clone (or bare mirror) of vuejs/docs")
    p.add_argument("--zh", type=Path, required=True, help="one of vuejs-translations/docs-zh-cn")
    p.add_argument("--out", type=Path, required=True)
    opts = p.parse_args()
    written = stage({"en": opts.en, "zh-CN": opts.zh}, opts.out)
    print(f"staged {written} pages and the questions in {opts.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
