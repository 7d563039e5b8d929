"""`python -m bench.eval.default_boosts_fit`: the service's default BM25 field
boosts, fitted on the train splits of the documentation sets.

`bench.eval.fit` fits the boosts SciFact's evaluation uses; the service's
defaults (`RAG_LEXICAL_{TITLE,HEADING}_BOOST`) serve everyone who fits
nothing: documentation sites, whose pages have titles and headings. This
command runs the third-party question set and the bilingual set, hybrid and
lexical, no reranking, once per point of the grid (title and heading boost
together, text 1; query time, so the third-party index is built once), and
chooses the point with the largest summed train MRR@10 of hybrid over the
two sets; a point is admissible only if neither set's train MRR@10 falls
below the current default's. The test splits play no part in the choice.
Results go to bench/results/default-boosts-fit.json.

    python -m bench.eval.default_boosts_fit            # about 4 minutes a point
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.paths import SCRATCH_DIR
from bench.common.record import run_record

RESULTS = Path(__file__).resolve().parents[1] / "results"
# (title, heading path); text stays 1. The first is the default before the fit.
GRID: tuple[tuple[float, float], ...] = (
    (2.0, 1.5),
    (1.0, 1.0),
    (0.5, 0.5),
    (0.25, 0.25),
    (0.1, 0.1),
    (0.05, 0.05),
)
OBJECTIVE = "summed train MRR@10 of hybrid, third-party + bilingual"
SETS = ("third_party", "bilingual")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m bench.eval.default_boosts_fit", description=__doc__)
    p.add_argument("--work", type=Path, default=SCRATCH_DIR / "default-boosts-fit")
    p.add_argument("--out", type=Path, default=RESULTS / "default-boosts-fit.json")
    args = p.parse_args(argv)
    record = run_record(["-m", "bench.eval.default_boosts_fit", *argv])
    grid = [evaluate_point(args.work, title, heading) for title, heading in GRID]
    chosen = choose(grid)
    fit = {**record, "objective": OBJECTIVE, "grid": grid, "chosen": chosen["lexical_boosts"]}
    args.out.write_text(json.dumps(fit, indent=2) + "\n")
    print(f"chosen {chosen['lexical_boosts']} ({OBJECTIVE}); wrote {args.out}")
    return 0


def choose(grid: list[dict[str, Any]]) -> dict[str, Any]:
    """The admissible point with the largest summed train gain (the first
    point, today's default, is always admissible)."""
    base = grid[0]

    def admissible(point: dict[str, Any]) -> bool:
        return all(point[s]["train"]["hybrid"] >= base[s]["train"]["hybrid"] for s in SETS)

    return max(
        (point for point in grid if admissible(point)),
        key=lambda point: sum(point[s]["train"]["hybrid"] for s in SETS),
    )


def evaluate_point(work: Path, title: float, heading: float) -> dict[str, Any]:
    env = [f"RAG_LEXICAL_TITLE_BOOST={title:g}", f"RAG_LEXICAL_HEADING_BOOST={heading:g}"]
    point = work / f"{title:g}-{heading:g}"
    third = _run("bench.eval.third_party", point / "third-party", env, work / "third-party-index")
    bilingual = _run("bench.eval.bilingual", point / "bilingual", env, point / "bilingual-index")
    third_configs = json.loads((point / "third-party" / "third_party.json").read_text())["configs"]
    variants = json.loads((point / "bilingual" / "bilingual.json").read_text())["variants"]
    bilingual_configs = next(iter(variants.values()))["configs"]
    return {
        "lexical_boosts": {"title": title, "heading_path": heading, "text": 1.0},
        "third_party": _mrr(lambda c, s: third_configs[c][s]["mrr@10"]),
        "bilingual": _mrr(lambda c, s: bilingual_configs[c]["split_groups"][s]["all"]["mrr@10"]),
        "commands": [third, bilingual],
    }


def _mrr(read: Callable[[str, str], float]) -> dict[str, dict[str, float]]:
    """MRR@10 per split and configuration; `read(config, split)` finds it."""
    configs = ("lexical", "hybrid")
    return {split: {c: read(c, split) for c in configs} for split in ("train", "test")}


def _run(module: str, out: Path, env: list[str], data_dir: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", module, "--no-rerank", "--out", str(out)]
    command += ["--docs", str(out / "report.md"), "--data-dir", str(data_dir)]
    for item in env:
        command += ["--env", item]
    subprocess.run(command, check=True, env={**os.environ, "RAG_METRICS_ENABLED": "false"})
    return " ".join(command[1:])


if __name__ == "__main__":
    sys.exit(main())
