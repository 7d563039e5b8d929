"""Fetch and stage the third-party documentation the corpus regression suite
ingests (tests/indexer/corpus/; issue 24, point 5):

    python3 scripts/fetch_doc_corpus.py          # `make test-deps` runs it

Real documentation finds what generated Markdown does not: the pages a
package registry ships, as their authors wrote them, in HTML, Markdown and
plain text, in English and Chinese. Every source is pinned (an npm version
and the registry's sha512 of its tarball) or owned by a Debian package that
`make test-deps` installs, so every run sees the same pages.

Nothing of it is committed: pages are staged in a cache folder outside the
clone (`$RAG_DOC_CORPUS_DIR`, else `$XDG_CACHE_HOME/rag-services/doc-corpus`,
else `~/.cache/rag-services/doc-corpus`), one sub-folder per source under
`pages/`, each with a hidden stamp saying what it was staged from. A source
whose stamp matches is not fetched or copied again, so CI fetches once.

Only the standard library is used: the script runs before the venv exists.
"""

from __future__ import annotations

import base64
import fnmatch
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CORPUS_ENV = "RAG_DOC_CORPUS_DIR"
STAMP = ".staged-from"  # hidden: the directory loader skips it


class CorpusUnavailable(RuntimeError):
    """A source could not be fetched or found; the message says how to get it."""


@dataclass(frozen=True)
class DebianSource:
    """Pages a Debian package installs (`make test-deps` installs it)."""

    name: str  # the folder under pages/, and the doc_id prefix
    package: str
    root: str  # where the package puts the pages
    include: tuple[str, ...]  # fnmatch patterns on paths relative to root

    def describe(self) -> str:
        return f"Debian package {self.package}"


@dataclass(frozen=True)
class NpmSource:
    """Pages inside an npm package's tarball, fetched with `npm pack`."""

    name: str
    spec: str  # package@version: pinned so every run sees the same pages
    integrity: str  # the registry's sha512 of that tarball, checked on every use
    include: tuple[str, ...]  # fnmatch patterns on paths inside the package

    def describe(self) -> str:
        return f"npm package {self.spec}"

    @property
    def tarball_name(self) -> str:
        package, version = self.spec.rsplit("@", 1)
        return f"{package.lstrip('@').replace('/', '-')}-{version}.tgz"


Source = DebianSource | NpmSource

# nodejs-doc is deliberately absent: it conflicts with the Node.js package the
# machines carry, and installing it removes node and npm.
SOURCES: tuple[Source, ...] = (
    DebianSource(
        "python3-doc",
        "python3-doc",
        "/usr/share/doc/python3/html",
        ("*.html", "_sources/*.txt"),  # the reference as HTML, and its reST sources
    ),
    DebianSource("git-doc", "git-doc", "/usr/share/doc/git-doc", ("*.html", "*.txt")),
    DebianSource(
        "debian-reference-zh-cn",
        "debian-reference-zh-cn",
        "/usr/share/debian-reference",
        ("*.zh-cn.html",),  # the Debian Reference in Chinese
    ),
    NpmSource(
        "npm-docs",
        "npm@11.21.2",
        "sha512-7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A==",
        ("README.md", "docs/*.md", "docs/*.html"),
    ),
    NpmSource(
        "eslint-plugin-import",
        "eslint-plugin-import@2.32.0",
        "sha512-whOE1HFo/qJDyX4SnXzP4N6zOWn79WhnCUY/iDR0mPfQZO8wcYE4JClzI2oZrhBnnMUCBCHZhO6VQyoBU95mZA==",
        ("*.md",),
    ),
    NpmSource(
        "markdownlint",
        "markdownlint@0.40.0",
        "sha512-UKybllYNheWac61Ia7T6fzuQNDZimFIpCg2w6hHjgV1Qu0w1TV0LlSgryUGzM0bkKQCBhy2FDhEELB73Kb0kAg==",
        ("*.md",),  # Markdown about Markdown: broken examples on purpose
    ),
    NpmSource(
        "mand-mobile",
        "mand-mobile@2.7.0",
        "sha512-mq1R2qvEgEwbqeS9rhCEJgQbqIJphECNS+xBWXpBVvLVB9UjRTdhlqdEOzmxbEQ9Bti4Pi06iAMo8neFtoTW1w==",
        ("README*.md", "CHANGELOG*.md", "components/*.md"),  # Chinese, with English twins
    ),
)


@dataclass(frozen=True)
class StagedSource:
    source: Source
    path: Path  # pages/<name>
    files: int


def corpus_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The cache folder: outside the clone, so a fresh clone reuses it."""
    if explicit := environ.get(CORPUS_ENV):
        return Path(explicit)
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rag-services" / "doc-corpus"


def pages_dir(root: Path) -> Path:
    return root / "pages"


def ensure_corpus(
    root: Path | None = None, sources: Sequence[Source] = SOURCES
) -> list[StagedSource]:
    """Stage every source that is not staged yet; raise CorpusUnavailable
    naming every source that cannot be had (all are tried first)."""
    root = root or corpus_dir()
    staged: list[StagedSource] = []
    problems: list[str] = []
    for source in sources:
        try:
            staged.append(_ensure_source(root, source))
        except CorpusUnavailable as exc:
            problems.append(f"- {source.name} ({source.describe()}): {exc}")
    _remove_unknown_sources(pages_dir(root), {s.name for s in sources})
    if problems:
        raise CorpusUnavailable(
            f"the third-party documentation corpus in {root} is incomplete:\n"
            + "\n".join(problems)
            + "\nRun `make test-deps` (as root, or with sudo) with access to Debian's "
            "package archive and the npm registry."
        )
    return staged


def _ensure_source(root: Path, source: Source) -> StagedSource:
    target = pages_dir(root) / source.name
    if isinstance(source, DebianSource):
        files = _debian_files(source)
        identity = _listing_identity(files)
    else:
        identity = f"{source.spec} {source.integrity}"
    if _stamp(target) != identity:
        if isinstance(source, DebianSource):
            _stage(target, identity, _copy_debian(source, files))
        else:
            tarball = _npm_tarball(root / "downloads", source)
            _stage(target, identity, _npm_pages(tarball, source))
    count = sum(1 for p in target.rglob("*") if p.is_file() and p.name != STAMP)
    return StagedSource(source, target, count)


def _stamp(target: Path) -> str | None:
    try:
        return (target / STAMP).read_text(encoding="utf-8")
    except OSError:
        return None


def _stage(target: Path, identity: str, pages: Iterator[tuple[str, bytes]]) -> None:
    """Write into a fresh folder, then swap it in: a crash never leaves a
    half-staged source behind a valid stamp."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    for relpath, data in pages:
        path = partial / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    partial.mkdir(parents=True, exist_ok=True)
    (partial / STAMP).write_text(identity, encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def _remove_unknown_sources(pages: Path, known: set[str]) -> None:
    """A source dropped from SOURCES must not stay in the corpus."""
    for child in pages.glob("*") if pages.is_dir() else ():
        if child.is_dir() and child.name not in known and not child.name.startswith("."):
            shutil.rmtree(child)


def _matches(relpath: str, include: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(relpath, pattern) for pattern in include)


# ------------------------------------------------------------------ Debian


def _debian_files(source: DebianSource) -> list[tuple[str, Path]]:
    root = Path(source.root).resolve()
    if not root.is_dir():
        raise CorpusUnavailable(
            f"{source.root} does not exist: the package is not installed "
            f"(apt-get install {source.package})"
        )
    files = [
        (path.relative_to(root).as_posix(), path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    ]
    selected = [(rel, path) for rel, path in files if _matches(rel, source.include)]
    if not selected:
        raise CorpusUnavailable(f"no page under {source.root} matches {source.include}")
    return selected


def _listing_identity(files: list[tuple[str, Path]]) -> str:
    """Names, sizes and times of the installed pages: an upgraded package restages."""
    digest = hashlib.sha256()
    for rel, path in files:
        stat = path.stat()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{len(files)} files sha256:{digest.hexdigest()}"


def _copy_debian(
    source: DebianSource, files: list[tuple[str, Path]]
) -> Iterator[tuple[str, bytes]]:
    for rel, path in files:
        data = path.read_bytes()
        if rel.endswith(".gz"):
            rel, data = rel.removesuffix(".gz"), gzip.decompress(data)
        yield rel, data


# ------------------------------------------------------------------ npm


def _npm_tarball(downloads: Path, source: NpmSource) -> Path:
    """The package's tarball, fetched once with `npm pack`; its sha512 is
    checked against the pinned one on every use, cached or not."""
    tarball = downloads / source.tarball_name
    if not tarball.is_file() or _integrity(tarball) != source.integrity:
        _npm_pack(downloads, source)
    if not tarball.is_file():
        raise CorpusUnavailable(f"npm pack did not write {tarball.name}")
    if (actual := _integrity(tarball)) != source.integrity:
        tarball.unlink()
        raise CorpusUnavailable(f"tarball integrity {actual} is not the pinned one")
    return tarball


def _npm_pack(downloads: Path, source: NpmSource) -> None:
    downloads.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        raise CorpusUnavailable("npm is not installed")
    command = [npm, "pack", source.spec, "--pack-destination", str(downloads), "--json"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        raise CorpusUnavailable("`npm pack` got no answer from the registry in 300 s") from None
    if done.returncode != 0:
        raise CorpusUnavailable(f"`npm pack {source.spec}` failed: {_npm_error(done.stderr)}")
    reported = json.loads(done.stdout)[-1].get("integrity")
    if reported != source.integrity:
        raise CorpusUnavailable(f"the registry reports integrity {reported}, pinned is other")


def _npm_error(stderr: str) -> str:
    """npm's own words (code, then what failed), without its stack trace."""
    lines = [line.removeprefix("npm error").strip() for line in stderr.splitlines()]
    kept = [
        line
        for line in lines
        if line and not line.startswith(("at ", "A complete log", "npm warn"))
    ]
    return " / ".join(kept[:4]) or "no message"


def _integrity(path: Path) -> str:
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode("ascii")


def _npm_pages(tarball: Path, source: NpmSource) -> Iterator[tuple[str, bytes]]:
    """Regular files under package/ that match; nothing is extracted by
    tarfile itself, so no member can write outside the staging folder."""
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            rel = _package_relpath(member)
            if rel is None or not _matches(rel, source.include):
                continue
            data = archive.extractfile(member)
            if data is not None:
                yield rel, data.read()


def _package_relpath(member: tarfile.TarInfo) -> str | None:
    if not member.isfile():
        return None
    parts = PurePosixPath(member.name).parts
    if len(parts) < 2 or parts[0] != "package" or any(p in ("", ".", "..") for p in parts):
        return None
    return "/".join(parts[1:])


def main() -> int:
    root = corpus_dir()
    try:
        staged = ensure_corpus(root)
    except CorpusUnavailable as exc:
        print(f"fetch_doc_corpus: {exc}", file=sys.stderr)
        return 1
    for item in staged:
        print(f"{item.source.name}: {item.files} files ({item.source.describe()})")
    print(f"corpus: {sum(s.files for s in staged)} files in {pages_dir(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
