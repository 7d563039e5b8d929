"""The gRPC contract cannot break silently: `buf lint` holds the protos to
the style rules that do not touch the wire, and `buf breaking` compares them
with protos/baseline.binpb, the contract as last released (refresh it with
`make proto-baseline` when a release is cut). The real buf binary, installed
by `make test-deps` from the @bufbuild/buf npm package."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"
BASELINE = PROTOS / "baseline.binpb"
BUF = ROOT / ".tools" / "node_modules" / ".bin" / "buf"
RETRIEVER = Path("rag") / "retriever" / "v1" / "retriever.proto"


def buf(*args: str) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), f"{BUF} is missing: `make test-deps` installs buf (@bufbuild/buf)"
    return subprocess.run([str(BUF), *args], capture_output=True, text=True, timeout=120)


def edited_protos(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the protos with one edit in retriever.proto."""
    copy = tmp_path / "protos"
    shutil.copytree(PROTOS, copy)
    source = copy / RETRIEVER
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    source.write_text(text.replace(old, new), encoding="utf-8")
    return copy


def test_the_protos_pass_lint() -> None:
    result = buf("lint", str(PROTOS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_protos_are_compatible_with_the_released_contract() -> None:
    result = buf("breaking", str(PROTOS), "--against", str(BASELINE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_renumbered_field_breaks_the_build(tmp_path: Path) -> None:
    protos = edited_protos(tmp_path, "  string query = 1;", "  string query = 99;")
    result = buf("breaking", str(protos), "--against", str(BASELINE))
    assert result.returncode != 0
    assert 'field "1" with name "query" on message "RetrieveRequest"' in result.stdout


def test_a_removed_field_breaks_the_build(tmp_path: Path) -> None:
    removed = edited_protos(tmp_path, "  string query = 1;", "")
    assert buf("breaking", str(removed), "--against", str(BASELINE)).returncode != 0


def test_a_new_field_is_compatible(tmp_path: Path) -> None:
    grown = edited_protos(
        tmp_path, "  string query = 1;", "  string query = 1;\n  string note_for_test = 9999;"
    )
    result = buf("breaking", str(grown), "--against", str(BASELINE))
    assert result.returncode == 0, result.stdout + result.stderr
