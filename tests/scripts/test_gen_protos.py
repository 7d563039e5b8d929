"""The committed stubs must be exactly what the .proto files generate."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.gen_protos import DEFAULT_OUT, generate

pytestmark = pytest.mark.unit


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    fresh = generate(tmp_path / "genproto")
    committed = {
        p.relative_to(DEFAULT_OUT): p.read_text()
        for p in DEFAULT_OUT.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    regenerated = {p.relative_to(tmp_path / "genproto"): p.read_text() for p in fresh}
    assert set(regenerated) == set(committed), "run `make proto`: stub files differ"
    stale = [str(name) for name, text in regenerated.items() if committed[name] != text]
    assert not stale, f"run `make proto`: stale generated files {stale}"
