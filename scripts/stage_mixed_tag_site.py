"""Stage a bilingual data set whose pages spell each language two ways.

Real sites do: a generator writes `<html lang="en-US">` while Markdown pages
beside it declare nothing (read as `en`), one translator's folder is `zh/`
and another's `zh-CN/`. This copies a dataset of the `python -m
bench.eval.bilingual` layout (`pages/<locale>/…`, `queries.jsonl`) with every
other page (in path order) of each locale folder moved under a second tag of
the same language (`en` → `en-US`, `zh-CN` → `zh`, else `<language>-XX`), and
the judgments moved with them. The ranking should not care:

    python scripts/stage_mixed_tag_site.py --out .data/eval/bilingual-mixed-tags
    python -m bench.eval.bilingual --dataset .data/eval/bilingual-mixed-tags \\
        --out .data/eval/mixed-tags-results --docs .data/eval/mixed-tags-results/b.md

A page keeps its path below the locale folder, so its translations stay
linked (services/sources/translations.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

DEFAULT_DATASET = Path(__file__).resolve().parent.parent / "bench" / "datasets" / "bilingual"
SECOND_TAG = {"en": "en-US", "zh-CN": "zh"}


def second_tag(locale: str) -> str:
    """Another tag of `locale`'s language (`en` → `en-US`)."""
    return SECOND_TAG.get(locale, locale.split("-")[0] + "-XX")


def moved_pages(pages: Path) -> dict[str, str]:
    """Every page's path under `pages` → its path in the staged copy."""
    moves: dict[str, str] = {}
    for folder in sorted(p for p in pages.iterdir() if p.is_dir()):
        for i, page in enumerate(sorted(p for p in folder.rglob("*") if p.is_file())):
            inside = page.relative_to(folder).as_posix()
            locale = second_tag(folder.name) if i % 2 == 0 else folder.name
            moves[page.relative_to(pages).as_posix()] = f"{locale}/{inside}"
    return moves


def stage(dataset: Path, out: Path) -> int:
    """Write the copy; returns how many pages moved to a second tag."""
    shutil.rmtree(out, ignore_errors=True)
    moves = moved_pages(dataset / "pages")
    for old, new in moves.items():
        (out / "pages" / new).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dataset / "pages" / old, out / "pages" / new)
    with (
        (dataset / "queries.jsonl").open(encoding="utf-8") as src,
        (out / "queries.jsonl").open("w", encoding="utf-8") as dst,
    ):
        for line in src:
            if line.strip():
                query = json.loads(line)
                query["relevant"] = {moves[doc]: grade for doc, grade in query["relevant"].items()}
                dst.write(json.dumps(query, ensure_ascii=False) + "\n")
    return sum(1 for old, new in moves.items() if old != new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    moved = stage(args.dataset, args.out)
    print(f"{args.out}: {moved} pages moved to a second tag of their language")


if __name__ == "__main__":
    main()
