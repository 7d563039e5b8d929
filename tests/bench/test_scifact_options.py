"""The SciFact eval's rows state their document precision: the index folder
is named by it, and an index whose recorded encoders disagree stops the run
before anything is measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.common.paths import SHARED_DATASETS
from bench.eval.scifact_options import check_document_encoders, parse_args

pytestmark = pytest.mark.unit

SCIFACT = SHARED_DATASETS / "scifact"
needs_scifact = pytest.mark.skipif(
    not (SCIFACT / "corpus.jsonl").is_file(), reason=f"{SCIFACT} missing"
)


@needs_scifact
def test_rows_are_fp32_whatever_auto_would_pick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_EMBEDDING_DOCUMENT_PRECISION", raising=False)
    for argv in ([], ["--no-int8-documents"]):
        opts = parse_args(argv, "test")
        assert opts.stack_env["RAG_EMBEDDING_DOCUMENT_PRECISION"] == "fp32"
        assert opts.document_precision == "fp32" and opts.data_dir.name == "scifact"


@needs_scifact
def test_a_stated_int8_run_has_its_own_folder_and_no_int8_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_DOCUMENT_PRECISION", "int8")
    opts = parse_args([], "test")
    assert opts.stack_env["RAG_EMBEDDING_DOCUMENT_PRECISION"] == "int8"
    assert opts.data_dir.name == "scifact-int8"
    assert not opts.int8_documents  # the int8 row needs an fp32 reference


@needs_scifact
def test_an_index_built_at_another_precision_stops_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RAG_EMBEDDING_DOCUMENT_PRECISION", raising=False)
    opts = parse_args(["--data-dir", str(tmp_path)], "test")
    check_document_encoders({"document_encoders": ["onnx-fp32"]}, opts)
    check_document_encoders({"document_encoders": []}, opts)  # nothing recorded yet
    for encoders in (["onnx-int8"], ["onnx-int8", "onnx-fp32"]):
        with pytest.raises(SystemExit, match=r"onnx-int8.*states fp32.*--data-dir"):
            check_document_encoders({"document_encoders": encoders}, opts)
