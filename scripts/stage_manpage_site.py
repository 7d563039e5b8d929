"""Stage the bilingual man-page site the `manpages` question set is judged on.

Debian's English manual pages (`manpages`, `manpages-dev`) and their Chinese
translations (`manpages-zh`), rendered by `mandoc -Thtml` as a man-page site
does, one page per file: `pages/en/<section>/<name>.html` and
`pages/zh-CN/<section>/<name>.html`, each `<html lang>` set and its text in
UTF-8 (mandoc writes non-ASCII as character references). Which pages, from
bench/datasets/manpages/site.json: pages in both languages, and pages in one
language only (so a question can have its answer only in the other one).
The questions (queries.jsonl) are copied beside the pages, so the folder is a
dataset `python -m bench.eval.bilingual --dataset` reads:

    python scripts/stage_manpage_site.py --out .data/eval/manpages-site
    python -m bench.eval.bilingual --dataset .data/eval/manpages-site \\
        --out .data/eval/manpages-results --docs .data/eval/manpages-results/benchmarks.md

`make eval-manpages` installs the Debian packages (manpages-zh, mandoc) and
runs both. The pages are the packages' own text, never committed.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

DATASET = Path(__file__).resolve().parents[1] / "bench" / "datasets" / "manpages"
MAN_ROOT = Path("/usr/share/man")
# Where each locale's pages are installed, under MAN_ROOT.
LOCALE_DIRS = {"en": "", "zh-CN": "zh_CN"}
_REFERENCE = re.compile(r"&#x([0-9A-Fa-f]+);")


def _character(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return html.escape(char) if char in "<>&\"'" else char  # markup stays escaped


def render(source: Path, locale: str) -> str:
    """One manual page as the HTML a site would serve."""
    raw = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    done = subprocess.run(
        ["mandoc", "-Thtml", "-Ios=Linux"], input=raw, capture_output=True, timeout=60, check=True
    )
    page = _REFERENCE.sub(_character, done.stdout.decode("utf-8"))
    return page.replace("<html>", f'<html lang="{locale}">', 1)


def manual_page(locale: str, section: str, name: str) -> Path:
    folder = MAN_ROOT / LOCALE_DIRS[locale] / f"man{section}"
    for candidate in (folder / f"{name}.{section}.gz", folder / f"{name}.{section}"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no {locale} manual page {name}({section}) under {folder}")


def planned_pages(site: dict[str, dict[str, list[str]]]) -> list[tuple[str, str, str]]:
    """(locale, section, name) of every page: `both` in each locale."""
    pages = []
    for group, sections in site.items():
        locales = list(LOCALE_DIRS) if group == "both" else [group]
        for section, names in sections.items():
            pages += [(locale, section, name) for name in names for locale in locales]
    return pages


def stage(out: Path, roff: bool = False) -> int:
    """The site as HTML, or with `roff` as the manual pages' own source files
    (`pages/<locale>/<section>/<name>.<section>.gz`, the loader reads roff:
    services.sources.manual_pages), the questions judged on those names."""
    site = json.loads((DATASET / "site.json").read_text(encoding="utf-8"))
    shutil.rmtree(out / "pages", ignore_errors=True)
    pages = planned_pages(site)
    names: dict[str, str] = {}
    for locale, section, name in pages:
        source = manual_page(locale, section, name)
        folder = out / "pages" / locale / section
        folder.mkdir(parents=True, exist_ok=True)
        if roff:
            target = folder / f"{name}.{section}{'.gz' if source.suffix == '.gz' else ''}"
            shutil.copyfile(source, target)
            names[f"{locale}/{section}/{name}.html"] = f"{locale}/{section}/{target.name}"
        else:
            (folder / f"{name}.html").write_text(render(source, locale), encoding="utf-8")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as written:
        for line in (DATASET / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            question = json.loads(line)
            question["relevant"] = {names.get(k, k): v for k, v in question["relevant"].items()}
            written.write(json.dumps(question, ensure_ascii=False) + "\n")
    return len(pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the dataset folder to write")
    parser.add_argument(
        "--roff", action="store_true", help="the pages' roff sources instead of mandoc's HTML"
    )
    args = parser.parse_args(argv)
    if shutil.which("mandoc") is None and not args.roff:
        print(
            "mandoc is not installed (Debian: apt-get install mandoc manpages-zh)", file=sys.stderr
        )
        return 2
    try:
        count = stage(args.out, roff=args.roff)
    except (FileNotFoundError, subprocess.SubprocessError) as exc:
        print(f"cannot stage the site: {exc}", file=sys.stderr)
        return 1
    print(f"staged {count} pages and the questions in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
