"""The mixed-tag copy of the bilingual set: every page kept, half under a
second tag of its language, judgments moved with them (unit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.stage_mixed_tag_site import DEFAULT_DATASET, second_tag, stage

pytestmark = pytest.mark.unit


def test_half_of_each_locale_moves_to_a_second_tag_and_judgments_follow(tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    moved = stage(DEFAULT_DATASET, out)
    source = sorted(
        p.relative_to(DEFAULT_DATASET / "pages") for p in (DEFAULT_DATASET / "pages").rglob("*.md")
    )
    staged = sorted(p.relative_to(out / "pages") for p in (out / "pages").rglob("*.md"))
    assert len(staged) == len(source) and 0 < moved < len(source)
    assert {p.parts[0] for p in staged} == {"en", "en-US", "zh", "zh-CN"}
    assert {p.relative_to(p.parts[0]) for p in staged} == {
        p.relative_to(p.parts[0]) for p in source
    }
    for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        for doc in json.loads(line)["relevant"]:
            assert (out / "pages" / doc).is_file(), doc


def test_a_second_tag_is_of_the_same_language() -> None:
    assert second_tag("en") == "en-US" and second_tag("zh-CN") == "zh"
    assert second_tag("fr") == "fr-XX"
