"""scripts/fetch_doc_corpus.py: a cached tarball is staged without the
network and only its regular pages inside the package are written; a corpus
that cannot be had fails the corpus tests with every reason, not a skip."""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from scripts.fetch_doc_corpus import (
    STAMP,
    CorpusUnavailable,
    DebianSource,
    NpmSource,
    Source,
    corpus_dir,
    ensure_corpus,
    pages_dir,
)
from tests.support.doc_corpus import staged_corpus_or_fail
from tests.support.stack import free_port


def _tarball(members: dict[str, bytes], symlink: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if symlink:
            link = tarfile.TarInfo(symlink)
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(link)
    return buffer.getvalue()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


@pytest.mark.unit
def test_a_cached_tarball_is_staged_without_npm_and_only_its_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _tarball(
        {
            "package/docs/guide.md": b"# Guide\n",
            "package/docs/deep/api.md": b"# API\n",
            "package/index.js": b"module.exports = 1\n",
            "package/../escape.md": b"# out\n",
            "other/readme.md": b"# not the package\n",
        },
        symlink="package/docs/link.md",
    )
    source = NpmSource("fake", "fake-docs@1.0.0", _integrity(data), ("docs/*.md",))
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / source.tarball_name).write_bytes(data)
    monkeypatch.setenv("PATH", "")  # npm cannot run: the cached tarball must do
    [staged] = ensure_corpus(tmp_path, [source])
    files = sorted(p.relative_to(staged.path).as_posix() for p in staged.path.rglob("*"))
    assert files == [STAMP, "docs", "docs/deep", "docs/deep/api.md", "docs/guide.md"]
    assert staged.files == 2 and not (tmp_path / "escape.md").exists()
    (staged.path / "docs" / "guide.md").unlink()
    ensure_corpus(tmp_path, [source])  # the stamp matches: nothing is staged again
    assert not (staged.path / "docs" / "guide.md").exists()


@pytest.mark.unit
def test_a_source_dropped_from_the_list_leaves_the_corpus(tmp_path: Path) -> None:
    stale = pages_dir(tmp_path) / "old-source"
    stale.mkdir(parents=True)
    (stale / "page.md").write_text("# Old\n")
    root = tmp_path / "html"
    root.mkdir()
    (root / "index.html").write_text("<h1>Index</h1>")
    (root / "logo.png").write_bytes(b"\x89PNG")
    source = DebianSource("pkg-doc", "pkg-doc", str(root), ("*.html",))
    [staged] = ensure_corpus(tmp_path, [source])
    assert not stale.exists() and staged.files == 1
    assert (staged.path / "index.html").read_text() == "<h1>Index</h1>"


@pytest.mark.unit
def test_the_cache_is_outside_the_clone_and_can_be_moved() -> None:
    assert corpus_dir({"RAG_DOC_CORPUS_DIR": "/srv/corpus"}) == Path("/srv/corpus")
    xdg = corpus_dir({"XDG_CACHE_HOME": "/var/cache/ci"})
    assert xdg == Path("/var/cache/ci/rag-services/doc-corpus")


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm to reach a closed port")
def test_an_unreachable_registry_fails_the_corpus_tests_with_every_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry that is down (a closed port on loopback here) and a Debian
    package that is not installed: a failure naming both and the fix."""
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{free_port()}/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # nothing cached
    sources: list[Source] = [
        NpmSource("unreachable", "markdownlint@0.40.0", _integrity(b""), ("*.md",)),
        DebianSource("absent", "no-such-doc", str(tmp_path / "not-installed"), ("*.html",)),
    ]
    with pytest.raises(CorpusUnavailable):
        ensure_corpus(tmp_path / "cache", sources)
    with pytest.raises(pytest.fail.Exception) as failed:
        staged_corpus_or_fail(tmp_path / "cache", sources)
    message = str(failed.value)
    assert "npm pack markdownlint@0.40.0` failed" in message
    assert "apt-get install no-such-doc" in message
    assert "make test-deps" in message
