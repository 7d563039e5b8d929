"""The command line refuses what it can tell is wrong before any service is
asked, with exit 2 and a message naming the argument; an interrupt ends with
130 and says what state the index is in."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.operator import cli
from services.operator.ingest import printable

pytestmark = pytest.mark.unit

CLOSED = "127.0.0.1:9"  # nothing is asked of it: every case fails before a call


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = cli.main(["--addr", CLOSED, *argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_a_missing_path_is_a_clear_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path / "nowhere"), "--scope", "s")
    assert code == 2
    assert f"error: PATH {str(tmp_path / 'nowhere')!r} does not exist" in err
    assert "Traceback" not in err


def test_a_single_page_is_not_read_as_json_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "guide.md"
    page.write_text("# Guide\n\nText.\n", encoding="utf-8")
    code, err = run(capsys, "ingest", str(page), "--scope", "s")
    assert code == 2 and "is a single page: give the folder that holds it" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--batch", "0"], "argument --batch: '0' is not a positive number"),
        (["--batch", "-5"], "argument --batch: '-5' is not a positive number"),
        (["--batch-chars", "-1"], "argument --batch-chars: '-1' is not a positive number"),
        (["--batch", "many"], "argument --batch: 'many' is not a positive number"),
        (["--max-document-chars", "0"], "argument --max-document-chars: '0' is not a positive"),
    ],
)
def test_batch_sizes_must_be_positive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], words: str
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", *argv)
    assert code == 2 and words in err


def test_a_bad_document_limit_in_the_environment_is_named_as_the_variable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default comes from RAG_MAX_DOCUMENT_CHARS: a bad value there is no
    mistake in an argument the operator never typed."""
    monkeypatch.setenv("RAG_MAX_DOCUMENT_CHARS", "2M")
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--quiet")
    assert code == 2
    assert "error: RAG_MAX_DOCUMENT_CHARS in the environment: '2M' is not a positive" in err
    assert "--max-document-chars" not in err


def test_the_document_limit_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from services.operator.ingest import Ingest

    monkeypatch.setenv("RAG_MAX_DOCUMENT_CHARS", "1234")
    args = cli.parser().parse_args(["ingest", "x", "--scope", "s"])
    assert Ingest(None, args).max_document_chars == 1234  # type: ignore[arg-type]
    args = cli.parser().parse_args(["ingest", "x", "--scope", "s", "--max-document-chars", "99"])
    assert Ingest(None, args).max_document_chars == 99  # type: ignore[arg-type]


def test_a_scope_the_indexer_would_refuse_is_refused_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "hand book")
    assert code == 2
    assert "argument --scope: --scope: 'hand book' may hold only letters" in err


class _InterruptedClient:
    """A labelled fake, to inject the fault: the operator presses Ctrl-C
    while the first batch is in flight."""

    def upsert_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise KeyboardInterrupt

    def stats(self, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_ctrl_c_mid_ingest_exits_130_and_says_where_the_index_stands(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")

    def fake_client(addr: str, timeout: float) -> _InterruptedClient:
        return _InterruptedClient()

    monkeypatch.setattr(cli, "indexer_client", fake_client)
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--quiet")
    assert code == 130
    assert "interrupted: each request of --batch documents is one all-or-nothing run" in err
    assert "Traceback" not in err


def test_ctrl_c_outside_ingest_does_not_talk_of_batches(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_client(addr: str, timeout: float) -> _InterruptedClient:
        return _InterruptedClient()

    monkeypatch.setattr(cli, "indexer_client", fake_client)
    code, err = run(capsys, "stats")
    assert code == 130
    assert "interrupted: a write the Indexer started is one all-or-nothing run" in err
    assert "--batch" not in err and "Traceback" not in err


def test_control_characters_in_a_reported_name_are_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A file name holding an escape sequence must not reach the terminal raw."""
    from services.operator.ingest import Ingest

    ingest = Ingest(None, argparse.Namespace(dry_run=True, max_document_chars=10))  # type: ignore[arg-type]
    ingest.rejected.append("a\x1b[2Jb.md: cannot decode")
    ingest.skipped.append("c\nrejected forged.md: symbolic link, skipped")
    ingest._report()
    err = capsys.readouterr().err
    assert "rejected a\\x1b[2Jb.md: cannot decode" in err
    assert "skipped c\\nrejected forged.md" in err and "\x1b" not in err


@pytest.mark.parametrize("label", ["utf-7", "rot13", "no-such-encoding"])
def test_a_fallback_encoding_must_be_a_web_encoding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, label: str
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--fallback-encoding", label)
    assert code == 2
    assert f"argument --fallback-encoding: {label!r} is not a web page encoding" in err


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("a\nb/", "contains the control character U+000A"),
        (" docs/", "begins or ends with white space"),
        ("x" * 257, "257 characters, at most 256"),
    ],
)
def test_an_id_prefix_no_document_id_may_begin_with_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, prefix: str, message: str
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--id-prefix", prefix)
    assert code == 2
    assert "argument --id-prefix: " in err and message in err


def test_the_indexer_address_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--addr` always had a value, so RAG_INDEXER_ADDR was ignored without a
    word and the CLI dialled localhost:50051 (probe)."""
    from services.operator.cli_clients import cli_settings

    monkeypatch.setenv("RAG_INDEXER_ADDR", "indexer.internal:7001")
    args = cli.parser().parse_args(["stats"])
    assert cli_settings("indexer", args.addr, 5).target == "indexer.internal:7001"
    args = cli.parser().parse_args(["--addr", "other:7002", "stats"])
    assert cli_settings("indexer", args.addr, 5).target == "other:7002"
    monkeypatch.delenv("RAG_INDEXER_ADDR")
    assert cli_settings("indexer", None, 5).target == "localhost:50051"


def test_a_bad_indexer_address_in_the_environment_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_INDEXER_ADDR", "http://indexer:7001")
    code = cli.main(["stats"])
    err = capsys.readouterr().err
    assert code == 2 and "RAG_INDEXER_ADDR" in err and "without http://" in err


def test_a_bad_addr_argument_is_named_as_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--addr", "localhost", "stats"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("configuration error: --addr: 'localhost' is not")


@pytest.mark.parametrize(
    ("base_url", "words"),
    [
        ("ftp://mirror.example/docs/", "scheme 'ftp' is not allowed"),
        ("//cdn.example/docs/", "a scheme-relative URL (//host) is not allowed"),
        ("https://user:pw@docs.example/", "credentials"),
    ],
)
def test_a_base_url_the_indexer_would_refuse_is_refused_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, base_url: str, words: str
) -> None:
    """Else every page was refused in turn by the Indexer, exit status 1 (probe)."""
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--base-url", base_url)
    assert code == 2 and "argument --base-url" in err and words in err


def test_a_report_line_escapes_what_would_reorder_or_rewrite_the_terminal() -> None:
    """A bidi override in a file name turned the rest of its report line
    around (probe); control characters were escaped already."""
    assert printable("a\u202eb.md: rejected") == "a\\u202eb.md: rejected"
    assert printable("x\x1b[2J\ny") == "x\\x1b[2J\\ny"
    assert printable("指南 guide.md") == "指南 guide.md"


def test_allowing_an_empty_sync_without_a_sync_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, err = run(capsys, "ingest", str(tmp_path), "--scope", "s", "--allow-empty-sync")
    assert code == 2 and "argument --allow-empty-sync: only with --sync" in err
