"""`python -m bench.eval.fit`: fit the BM25 field boosts on the TRAIN split.

The lexical store scores title, heading path and text separately and sums
them with per-field boosts (`RAG_LEXICAL_{TITLE,HEADING,TEXT}_BOOST`, query
time, no re-indexing). Their best values are a property of the corpus. This
command runs `bench.eval.scifact` on the train split (lexical and hybrid only) for
each point of a small grid and records every result and the point with the
best hybrid nDCG@10 in bench/results/<dataset>-fit.json. `bench.eval.scifact` then
uses the chosen boosts for the test split: test queries never influence a
setting.

    python -m bench.eval.fit                       # SciFact, about 40 s per grid point
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common.paths import SCRATCH_DIR, SHARED_DATASETS
from bench.common.record import run_record
from bench.eval import scifact
from bench.eval.dataset import BeirDataset
from bench.eval.scifact_options import fit_file

# (title, heading_path, text); the first is the service default.
GRID: tuple[tuple[float, float, float], ...] = (
    (2.0, 1.5, 1.0),
    (1.0, 1.0, 1.0),
    (0.5, 0.5, 1.0),
    (0.25, 0.25, 1.0),
    (0.1, 0.1, 1.0),
    (0.05, 0.05, 1.0),
)
OBJECTIVE = "hybrid nDCG@10, train split"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m bench.eval.fit", description=__doc__)
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    args = p.parse_args(argv)
    dataset = BeirDataset(args.dataset, "train")
    dataset.check()
    record = run_record(["-m", "bench.eval.fit", *argv])
    grid = [evaluate_point(dataset, boosts) for boosts in GRID]
    best = max(grid, key=lambda point: point["hybrid"]["ndcg@10"])
    fit = {
        "dataset": dataset.name,
        "split": "train",
        **record,
        "objective": OBJECTIVE,
        "grid": grid,
        "chosen": {"lexical_boosts": best["lexical_boosts"]},
    }
    path = fit_file(dataset.name)
    path.write_text(json.dumps(fit, indent=2) + "\n")
    print(
        f"chosen {best['lexical_boosts']} ({OBJECTIVE} {best['hybrid']['ndcg@10']}); wrote {path}"
    )
    return 0


def evaluate_point(dataset: BeirDataset, boosts: tuple[float, float, float]) -> dict[str, Any]:
    text = ",".join(f"{b:g}" for b in boosts)
    out = SCRATCH_DIR / "fit" / dataset.name / text
    scifact.main(
        [
            "--dataset",
            str(dataset.root),
            "--split",
            "train",
            "--no-peer",
            "--no-fit",
            "--configs",
            "lexical,hybrid",
            "--lexical-boosts",
            text,
            "--out",
            str(out),
        ]
    )
    result = json.loads((out / f"{dataset.name}-train.json").read_text())
    return {
        "lexical_boosts": dict(zip(("title", "heading_path", "text"), boosts, strict=True)),
        **{name: result["configs"][name] for name in ("lexical", "hybrid")},
    }


if __name__ == "__main__":
    sys.exit(main())
