"""A folder's files that are not UTF-8 and name no charset: rejected with a
hint, or read in the operator's fallback encoding (legacy Chinese GB18030 /
Big5, Shift_JIS), UTF-8 files of the same folder still read as UTF-8. Real
files in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.models import ContentType, Document
from services.sources.loaders import LoadError, load_directory
from services.sources.text_files import decode_text

pytestmark = pytest.mark.unit

GUIDE = "# 安装指南\n\n服务默认监听 8443 端口，限流时返回 429。\n"


def load(root: Path, fallback: str = "") -> tuple[dict[str, Document], dict[str, LoadError]]:
    items = list(load_directory(root, scope_id="s", fallback_encoding=fallback))
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    return docs, {i.source: i for i in items if isinstance(i, LoadError)}


def write_folder(root: Path) -> None:
    (root / "zh").mkdir(parents=True)
    (root / "zh" / "install.md").write_bytes(GUIDE.encode("gb18030"))  # a legacy file
    (root / "zh" / "faq.md").write_text("# 常见问题\n\n先看日志。\n", encoding="utf-8")
    (root / "readme.txt").write_bytes("Café menu: crème brûlée\n".encode("cp1252"))


def test_a_file_that_is_not_utf8_is_rejected_with_a_hint(tmp_path: Path) -> None:
    write_folder(tmp_path)
    docs, errors = load(tmp_path)
    assert sorted(docs) == ["zh/faq.md"]
    reason = errors["zh/install.md"].reason
    assert reason.startswith("cannot decode as utf-8 at byte 2: ")
    assert reason.endswith("(a file in a legacy encoding is read with --fallback-encoding)")


def test_the_fallback_reads_legacy_files_and_utf8_stays_utf8(tmp_path: Path) -> None:
    write_folder(tmp_path)
    docs, errors = load(tmp_path, "gb18030")
    assert (docs["zh/install.md"].text, docs["zh/install.md"].title) == (GUIDE, "安装指南")
    assert docs["zh/install.md"].locale == "zh"  # read by its script, as any Chinese page
    assert docs["zh/faq.md"].text == "# 常见问题\n\n先看日志。\n"  # valid UTF-8 wins
    # cp1252 bytes are not GB18030 either: rejected as such, not read as something else.
    assert list(errors) == ["readme.txt"]
    assert errors["readme.txt"].reason.startswith("cannot decode as gb18030 at byte 3")
    assert load(tmp_path, "windows-1252")[0]["readme.txt"].text == "Café menu: crème brûlée\n"


@pytest.mark.parametrize(
    ("raw", "fallback", "expected"),
    [
        ("繁體中文說明".encode("big5"), "big5", "繁體中文說明"),
        ("日本語の説明".encode("shift_jis"), "shift_jis", "日本語の説明"),
        (b"\xef\xbb\xbfBOM first", "gb18030", "BOM first"),  # a byte-order mark still decides
    ],
)
def test_decoding_with_a_fallback(raw: bytes, fallback: str, expected: str) -> None:
    assert decode_text(raw, ContentType.TEXT, fallback) == expected


def test_an_html_charset_wins_over_the_fallback() -> None:
    page = '<meta charset="big5"><p>繁體</p>'.encode("big5")
    assert "繁體" in decode_text(page, ContentType.HTML, "shift_jis")
    undeclared = "<p>简体</p>".encode("gb18030")
    assert "简体" in decode_text(undeclared, ContentType.HTML, "gb18030")
    with pytest.raises(UnicodeDecodeError):
        decode_text(undeclared, ContentType.HTML)
