"""Unit tests for HTML conversion, body normalisation and the document loaders."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from services.core.errors import InvalidArgument, NotFound
from services.core.models import ContentType, Document
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.planning import document_chunks
from services.sources.loaders import (
    LoadError,
    content_type_for_filename,
    html_to_markdown,
    load_beir_jsonl,
    load_directory,
    load_jsonl_documents,
    normalize_body,
)

pytestmark = pytest.mark.unit

SCIFACT = Path("/work/shared/datasets/scifact/corpus.jsonl")

PAGE = """<!doctype html>
<html><head><title> Ports  guide </title>
<style>p { color: red }</style><script>track("visit")</script></head>
<body>
<header><nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav></header>
<main>
  <h1>Setting up</h1>
  <p>The service listens on
     port <b>8080</b>.<br>Change it with <code>--port</code>.</p>
  <!-- build: 1234 -->
  <h2>Options</h2>
  <ul><li>fast</li><li>safe<ol><li>nested</li></ol></li></ul>
  <pre><code class="language-yaml">server:
  port: 8080
</code></pre>
  <table><tr><th>name</th><th>default</th></tr><tr><td>port</td><td>8080</td></tr></table>
  <form><input name="q"><button>Search</button></form>
</main>
<aside>Sponsored</aside><noscript>Enable JS</noscript>
<footer>© Example</footer>
</body></html>"""


# ------------------------------------------------------------------ HTML


def test_html_boilerplate_is_dropped() -> None:
    _, markdown = html_to_markdown(PAGE)
    for noise in ("Home", "Docs", "track(", "color: red", "build: 1234", "Search",
                  "Sponsored", "Enable JS", "Example"):  # fmt: skip
        assert noise not in markdown


def test_html_structure_becomes_markdown() -> None:
    title, markdown = html_to_markdown(PAGE)
    assert title == "Ports guide"
    blocks = markdown.split("\n\n")
    assert blocks[:3] == [
        "# Setting up",
        "The service listens on port 8080.\nChange it with `--port`.",
        "## Options",
    ]
    assert "- fast\n- safe\n  - nested" in blocks
    assert "```yaml\nserver:\n  port: 8080\n```" in blocks
    assert "| name | default |\n| --- | --- |\n| port | 8080 |" in blocks


def test_html_title_falls_back_to_first_h1() -> None:
    assert html_to_markdown("<h1>Only  <i>heading</i></h1><p>x</p>")[0] == "Only heading"
    assert html_to_markdown("<p>no title</p>")[0] == ""


def test_html_text_that_looks_like_markdown_stays_text() -> None:
    _, markdown = html_to_markdown("<p># not a heading</p><p>| not a row</p>")
    assert [h for h in markdown.split("\n\n") if h.startswith(("#", "|"))] == []


def test_pre_with_backticks_gets_a_longer_fence() -> None:
    _, markdown = html_to_markdown("<pre>a ``` b</pre>")
    assert markdown == "````\na ``` b\n````"


def test_chunks_of_converted_html_carry_headings() -> None:
    spans = Chunker().split(html_to_markdown(PAGE)[1])
    assert spans and spans[0].heading_path == "Setting up"


# ------------------------------------------------------------------ bodies


def test_normalize_body_by_content_type() -> None:
    html = Document(doc_id="a", text=PAGE, content_type=ContentType.HTML)
    assert normalize_body(html).startswith("# Setting up\n\n")
    markdown = Document(doc_id="b", text="# T\r\n\r\nbody\rline", content_type=ContentType.MARKDOWN)
    assert normalize_body(markdown) == "# T\n\nbody\nline"
    text = Document(doc_id="c", text="plain <b>not html</b>", content_type=ContentType.TEXT)
    assert normalize_body(text) == "plain <b>not html</b>"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.md", ContentType.MARKDOWN),
        ("a.MARKDOWN", ContentType.MARKDOWN),
        ("dir/a.html", ContentType.HTML),
        ("a.htm", ContentType.HTML),
        ("a.txt", ContentType.TEXT),
        ("guide.rst", ContentType.TEXT),
        ("manual.adoc", ContentType.TEXT),
        ("manual.asciidoc", ContentType.TEXT),
    ],
)
def test_content_type_from_suffix(name: str, expected: ContentType) -> None:
    assert content_type_for_filename(name) is expected


@pytest.mark.parametrize("name", ["a.pdf", "MAILING-LIST", "a.md.bak"])
def test_unsupported_suffix_is_rejected(name: str) -> None:
    with pytest.raises(InvalidArgument, match="unsupported file type"):
        content_type_for_filename(name)


# ------------------------------------------------------------------ directories


def test_rest_and_asciidoc_files_are_titled_and_chunked_by_their_sections(tmp_path: Path) -> None:
    prose = "Words of prose that fill a section of the page. " * 6
    (tmp_path / "install.rst").write_text(
        f"==========\nInstalling\n==========\n\n{prose}\n\nFrom source\n-----------\n\n{prose}\n"
    )
    (tmp_path / "git-stash.adoc").write_text(f"git-stash(1)\n============\n\nNAME\n----\n{prose}\n")
    docs = {d.doc_id: d for d in load_directory(tmp_path, scope_id="s") if isinstance(d, Document)}
    assert docs["install.rst"].title == "Installing"
    assert docs["git-stash.adoc"].title == "git-stash(1)"
    chunks = document_chunks(
        Chunker(ChunkingParams(target_chars=200, overlap_chars=50)), docs["install.rst"]
    )
    assert chunks[-1].heading_path == "Installing > From source"


@pytest.fixture
def docs_root(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guide" / "deep").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "index.md").write_text("Intro\n\n# Welcome\r\n\r\nHello.\n", encoding="utf-8")
    (root / "guide" / "setup.html").write_bytes(
        b'<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
        b"<body><h1>Setup</h1><p>Cr\xe8me br\xfbl\xe9e</p></body></html>"
    )
    (root / "guide" / "deep" / "notes.txt").write_bytes(
        "UTF-16 ✓ notes".encode("utf-16")
    )  # with BOM
    (root / "guide" / "bom.md").write_bytes(b"\xef\xbb\xbf# With BOM\n")
    (root / "guide" / "broken.md").write_bytes(b"# Bad \xff\xfe bytes \xc3\x28\n")
    (root / "guide" / "image.png").write_bytes(b"\x89PNG")
    (root / ".hidden" / "secret.md").write_text("# no", encoding="utf-8")
    (root / "spaced name.md").write_text("no heading here", encoding="utf-8")
    return root


def test_directory_loader_reads_supported_files_in_sorted_order(docs_root: Path) -> None:
    items = list(load_directory(docs_root, scope_id="site", locale="fr"))
    assert [i.doc_id if isinstance(i, Document) else i.source for i in items] == [
        ".",  # the files not read: guide/image.png
        "guide/bom.md",
        "guide/broken.md",
        "guide/deep/notes.txt",
        "guide/setup.html",
        "index.md",
        "spaced name.md",
    ]
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    assert all(d.scope_id == "site" and d.locale == "fr" for d in docs.values())
    assert docs["index.md"].title == "Welcome"
    assert docs["index.md"].text == "Intro\n\n# Welcome\n\nHello.\n"
    assert docs["index.md"].url == "index.md"
    assert docs["index.md"].metadata == {"path": "index.md"}
    assert docs["guide/bom.md"].text == "# With BOM\n"
    assert docs["guide/deep/notes.txt"].text == "UTF-16 ✓ notes"
    assert docs["guide/deep/notes.txt"].title == "notes"
    assert docs["spaced name.md"].title == "spaced name"
    assert docs["index.md"].updated_at.endswith("+00:00")


def test_a_page_holding_a_nul_character_loads_without_it(tmp_path: Path) -> None:
    """javadoc's CharUtils.html holds one raw NUL: the page was rejected whole
    (`text: contains NUL characters`); read from a folder it loads without it."""
    page = b"<html><head><title>CharUtils</title></head><body><p><code>\x00</code> NUL.</p>"
    (tmp_path / "CharUtils.html").write_bytes(page + b"<p>toChar converts.</p></body></html>")
    items = list(load_directory(tmp_path, scope_id="s"))
    assert [type(i) for i in items] == [Document]
    assert items[0].text == "NUL.\n\ntoChar converts." and "\x00" not in items[0].text


def test_directory_loader_converts_html_with_declared_charset(docs_root: Path) -> None:
    setup = next(
        i for i in load_directory(docs_root, scope_id="s")
        if isinstance(i, Document) and i.doc_id == "guide/setup.html"
    )  # fmt: skip
    assert setup.title == "Café"
    assert setup.content_type is ContentType.MARKDOWN
    assert setup.text == "# Setup\n\nCrème brûlée"


def test_undecodable_file_is_reported_and_the_rest_still_loads(docs_root: Path) -> None:
    items = list(load_directory(docs_root, scope_id="s"))
    errors = [i for i in items if isinstance(i, LoadError) and not i.skipped]
    assert len(errors) == 1
    assert errors[0].source == "guide/broken.md"
    assert "utf-8" in errors[0].reason and "byte 6" in errors[0].reason
    assert sum(isinstance(i, Document) for i in items) == 5


@pytest.mark.parametrize("charset", ["undefined", "punycode", "rot13", "unicode_escape", "bogus"])
def test_a_charset_no_browser_decodes_rejects_that_page(tmp_path: Path, charset: str) -> None:
    page = f'<html><head><meta charset="{charset}"></head><body><p>Text</p></body></html>'
    (tmp_path / "page.html").write_text(page)
    (tmp_path / "ok.html").write_text('<meta charset="Windows-1252"><p>Caf\xe9</p>', "cp1252")
    items = list(load_directory(tmp_path, scope_id="s"))
    assert [(type(i).__name__, getattr(i, "doc_id", "")) for i in items] == [
        ("Document", "ok.html"),
        ("LoadError", ""),
    ]
    assert items[0].text == "Café"  # type: ignore[union-attr]
    assert "unknown declared charset" in items[1].reason  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("charset", "encoding", "word"),
    [
        ("iso-8859-9", "cp1254", "Çağ"),
        ("tis-620", "cp874", "ภาษา"),
        ("Shift_JIS", "shift_jis", "日本"),
    ],
)
def test_web_charsets_decode(tmp_path: Path, charset: str, encoding: str, word: str) -> None:
    page = f'<html><head><meta charset="{charset}"></head><body><p>{word}</p></body></html>'
    (tmp_path / "page.html").write_bytes(page.encode(encoding))
    (item,) = load_directory(tmp_path, scope_id="s")
    assert isinstance(item, Document) and item.text == word


@pytest.mark.parametrize("charset", ["utf-16", "UTF-16LE", "utf-16be"])
def test_a_utf16_meta_in_ascii_bytes_means_utf8(tmp_path: Path, charset: str) -> None:
    """The HTML standard's prescan: a `<meta>` readable as ASCII is no UTF-16
    text, whatever it says (decoded as UTF-16 it was one line of CJK noise)."""
    page = f'<html><head><meta charset="{charset}"></head><body><p>Café 429</p></body></html>'
    (tmp_path / "page.html").write_bytes(page.encode("utf-8"))
    (item,) = load_directory(tmp_path, scope_id="s")
    assert isinstance(item, Document) and item.text == "Café 429"


def test_directory_loader_builds_urls_from_base(docs_root: Path) -> None:
    urls = {
        i.doc_id: i.url
        for i in load_directory(docs_root, scope_id="s", base_url="https://example.com/docs/")
        if isinstance(i, Document)
    }
    assert urls["guide/setup.html"] == "https://example.com/docs/guide/setup.html"
    assert urls["spaced name.md"] == "https://example.com/docs/spaced%20name.md"


def test_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        list(load_directory(tmp_path / "nope", scope_id="s"))


# ------------------------------------------------------------------ JSON lines


def test_beir_loader_streams_documents_and_reports_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    lines = [
        json.dumps({"_id": "1", "title": "T1", "text": "Body one."}).encode(),
        b"",
        b"{not json",
        json.dumps({"title": "no id", "text": "x"}).encode(),
        b"[1, 2]",
        json.dumps({"_id": 7, "text": "Seven", "metadata": {"year": 2020, "k": "v"}}).encode(),
        b'{"_id": "8", "text": "bad \xff byte"}',
        json.dumps({"_id": "9", "text": "Nine", "title": None}).encode(),
        b"[" * 100_000,
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(load_beir_jsonl(path, scope_id="scifact"))
    docs = [i for i in items if isinstance(i, Document)]
    errors = [i for i in items if isinstance(i, LoadError)]
    assert [d.doc_id for d in docs] == ["1", "7", "9"]
    assert docs[0] == Document(
        doc_id="1", text="Body one.", title="T1", scope_id="scifact", content_type=ContentType.TEXT
    )
    assert docs[1].metadata == {"year": "2020", "k": "v"}
    assert [e.source for e in errors] == [
        "corpus.jsonl:3", "corpus.jsonl:4", "corpus.jsonl:5", "corpus.jsonl:7",
        "corpus.jsonl:9",
    ]  # fmt: skip
    assert "not valid JSON" in errors[0].reason
    assert "'_id' is required" in errors[1].reason
    assert "not a JSON object" in errors[2].reason
    assert "cannot decode" in errors[3].reason
    assert errors[4].reason == "not valid JSON: nested too deeply"


def test_beir_title_as_heading_puts_the_title_into_the_content(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    records = [
        {"_id": "1", "title": "Vitamin D\nand bones", "text": "First sentence. " * 80},
        {"_id": "2", "title": "", "text": "Untitled body."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    titled, untitled = list(load_beir_jsonl(path, scope_id="s", title_as_heading=True))
    assert isinstance(titled, Document) and isinstance(untitled, Document)
    assert titled.text.startswith("# Vitamin D and bones\n\nFirst sentence.")
    assert (titled.title, titled.content_type) == ("Vitamin D\nand bones", ContentType.MARKDOWN)
    # Every chunk, not only the first, carries the title as its heading path.
    spans = Chunker().split(normalize_body(titled))
    assert len(spans) > 1 and {s.heading_path for s in spans} == {"Vitamin D and bones"}
    # Without a title there is no empty heading: the body stays as it was.
    assert (untitled.text, untitled.content_type) == ("Untitled body.", ContentType.TEXT)
    plain = next(iter(load_beir_jsonl(path, scope_id="s")))
    assert isinstance(plain, Document) and plain.text == records[0]["text"]


def test_beir_loader_on_the_first_scifact_lines(tmp_path: Path) -> None:
    if not SCIFACT.is_file():
        pytest.skip("SciFact corpus not present on this machine")
    sample = tmp_path / "sample.jsonl"
    with SCIFACT.open("rb") as source:
        sample.write_bytes(b"".join(itertools.islice(source, 50)))
    docs = list(load_beir_jsonl(sample, scope_id="scifact"))
    assert len(docs) == 50 and all(isinstance(d, Document) for d in docs)
    expected_ids = [json.loads(line)["_id"] for line in sample.read_text().splitlines()]
    assert [d.doc_id for d in docs if isinstance(d, Document)] == expected_ids
    chunker = Chunker()
    for doc in docs:
        assert isinstance(doc, Document) and doc.title and doc.text
        spans = chunker.split(normalize_body(doc))
        assert spans and all(len(s.text) <= chunker.params.max_chars for s in spans)


def test_own_jsonl_format(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    records = [
        {"doc_id": "a", "text": "<p>hi</p>", "content_type": "html", "url": "https://x/a",
         "metadata": {"tags": ["x"]}, "scope_id": "other"},
        {"doc_id": "b", "text": "# B", "locale": "de", "updated_at": "2024-01-01"},
        {"doc_id": "c", "text": "x", "content_type": "pdf"},
        {"doc_id": "d"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    items = list(load_jsonl_documents(path, scope_id="site"))
    a, b, bad_type, no_text = items
    assert isinstance(a, Document) and isinstance(b, Document)
    assert (a.content_type, a.scope_id, a.metadata) == (
        ContentType.HTML,
        "other",
        {"tags": '["x"]'},
    )
    assert (b.scope_id, b.locale, b.updated_at) == ("site", "de", "2024-01-01")
    assert isinstance(bad_type, LoadError) and "content_type" in bad_type.reason
    assert isinstance(no_text, LoadError) and "'text' is required" in no_text.reason


def test_missing_jsonl_file_raises(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        list(load_beir_jsonl(tmp_path / "missing.jsonl", scope_id="s"))


# ------------------------------------------------------------------ front matter


def _load_one(root: Path, name: str, text: str) -> Document:
    root.mkdir(exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    items = load_directory(root, scope_id="s")
    (item,) = [i for i in items if isinstance(i, Document) and i.doc_id == name]
    return item


def test_front_matter_gives_title_and_metadata(tmp_path: Path) -> None:
    page = (
        "---\n# a YAML comment, not a heading\ntitle: Installing  Acme\nweight: 3\n"
        "draft: false\ndate: 2024-05-01\ntags: [setup, linux]\nsidebar: {position: 2}\n"
        "path: /elsewhere\n---\n\n# Install\n\nRun the installer.\n"
    )
    doc = _load_one(tmp_path / "docs", "install.md", page)
    assert doc.title == "Installing Acme"
    assert doc.metadata == {"weight": "3", "draft": "false", "date": "2024-05-01",
                            "path": "install.md"}  # fmt: skip
    # The text stays as written; the Indexer's cleaning cuts the front matter.
    assert doc.text == page
    assert normalize_body(doc) == "# Install\n\nRun the installer.\n"
    assert normalize_body(doc, clean=False) == page


def test_front_matter_without_title_falls_back_to_the_h1(tmp_path: Path) -> None:
    page = "---\nauthor: Ann\n---\n<!-- generated -->\n# Guide <!-- v2 -->\n\nText.\n"
    doc = _load_one(tmp_path / "docs", "guide.md", page)
    assert (doc.title, doc.metadata) == ("Guide", {"author": "Ann", "path": "guide.md"})


def test_front_matter_metadata_is_bounded(tmp_path: Path) -> None:
    fields = [f"key{i:02}: value {i}" for i in range(40)]
    fields += ["k" * 65 + ": too long a key", "long: " + "v" * 257, "a=b: no equals"]
    page = "---\n" + "\n".join(fields[-3:] + fields[:-3]) + "\n---\nBody.\n"
    doc = _load_one(tmp_path / "docs", "many.md", page)
    assert len(doc.metadata) == 33  # 32 from the front matter, plus the path
    assert all(len(k) <= 64 and len(v) <= 256 and "=" not in k for k, v in doc.metadata.items())
    assert doc.metadata["key31"] == "value 31" and "key32" not in doc.metadata


@pytest.mark.parametrize(
    "front_matter",
    [
        "---\ntitle: [unclosed\n---\n",
        "---\ndate: 2024-02-30\n---\n",  # PyYAML cannot build this date
        "---\ntitle: a\n- b\n---\n",  # a mapping, then a list item
        "---\n---\n",
    ],
)
def test_bad_front_matter_is_ignored_and_never_fails_the_load(
    tmp_path: Path, front_matter: str
) -> None:
    doc = _load_one(tmp_path / "docs", "bad.md", front_matter + "# Heading\n\nBody.\n")
    assert (doc.title, doc.metadata) == ("Heading", {"path": "bad.md"})
    assert normalize_body(doc) == "# Heading\n\nBody.\n"


def test_a_page_nested_600_deep_is_read(tmp_path: Path) -> None:
    """Valid HTML with 600 `<p>` left open (the parser nests them) once
    stopped `ingest` with a RecursionError."""
    page = "<html><body>" + "".join(f"<p>para{i} " for i in range(600))
    (tmp_path / "deep.html").write_text(page, encoding="utf-8")
    (doc,) = list(load_directory(tmp_path, scope_id="site"))
    assert isinstance(doc, Document) and "para599" in doc.text
