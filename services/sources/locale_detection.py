"""Which locale a page of a folder is in: tag form, folder names, script.

The directory loader asks, in order: the operator's `--locale`, the page's
front matter (`lang`, `locale`), `<html lang>`, a locale folder in the
page's path or a locale in its file name (`README.en-US.md`), the script of
its text; the first that answers wins. This module holds the three rules
that need more than a lookup:

- `normalize_tag`: the one spelling of a tag the project uses (`zh-CN`,
  `en`, `zh-Hans`), as the bilingual data set and the Retriever's filters
  spell it, so `zh_cn`, `ZH-CN` and `zh-CN` are one locale, not three.
- `PathLocales`: which folder names (and file-name parts) are locales.
  Folder names are the least deliberate of the sources (`go/`, `api/`,
  `ml/`, `it/` are ordinary folders), so the rule is conservative; see
  `PathLocales`.
- `script_locale`: the language the script of a page's text names.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from services.core.analysis.scripts import HAN_CHAR, HANGUL_CHAR, KANA_CHAR, OTHER_WORD
from services.core.field_rules import canonical_tag_case
from services.sources.renderings import page_stem

# A tag as people write it: primary language, then subtags joined by "-" or "_".
_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")
# Well-formed tags that name no language a page could be written in.
_NOT_A_LANGUAGE = frozenset({"und", "mul", "mis", "zxx"})
_MAX_SUBTAGS = 3  # what the Indexer's validation accepts ("zh-Hant-TW" and one more)


def normalize_tag(tag: str) -> str | None:
    """The canonical form of a language tag, or None when it is not one.

    Case as BCP 47 recommends (`zh-cn` → `zh-CN`, `EN` → `en`, `zh-hans` →
    `zh-Hans`), `_` read as `-`. An extension or private-use part (`-u-…`,
    `-x-…`) and subtags past the third are dropped: they refine a locale,
    and the Indexer accepts at most three subtags.
    """
    tag = tag.strip()
    if not _TAG.fullmatch(tag):
        return None
    primary, *rest = re.split(r"[-_]", tag)
    if primary.lower() in _NOT_A_LANGUAGE:
        return None
    subtags: list[str] = []
    for subtag in rest:
        if len(subtag) == 1 or len(subtags) == _MAX_SUBTAGS:
            break
        subtags.append(subtag)
    return canonical_tag_case("-".join([primary, *subtags]))


# ------------------------------------------------------------------ folders


def _codes(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Languages documentation sites publish in (ISO 639-1, plus `fil` and `yue`).
_KNOWN_LANGUAGES = _codes("""
    af am ar az be bg bn bs ca cs cy da de el en eo es et eu fa fi fil fr ga gl gu he
    hi hr hu hy id is it ja ka kk km kn ko ky lo lt lv mk ml mn mr ms my nb ne nl nn no
    pa pl pt ro ru si sk sl sq sr sv sw ta te th tl tr uk ur uz vi yue zh zu
""")
# Codes that are also words or abbreviations a folder is often named by
# (`it/`, `id/`, `ml/`, `ca/` for certificates, `hr/`, `uk/`, `no/`, ...).
_AMBIGUOUS_LANGUAGES = _codes("""
    am ar be ca cs el et fa gl hi hr hy id is it ka km ml mn mr ms my ne no pa pl ro
    si sk sq sr sw ta te tl uk ur
""")
_KNOWN_SCRIPTS = frozenset({
    "arab", "cyrl", "deva", "grek", "hans", "hant", "hebr", "hira", "jpan", "kana",
    "kore", "latn", "thai",
})  # fmt: skip
_FOLDER_TAG = re.compile(
    r"(?P<language>[a-z]{2,3})(?:[-_](?P<script>[a-z]{4}))?(?:[-_](?P<region>[a-z]{2}|[0-9]{3}))?"
)


# Country codes sites name a language by (`cn/`, `guide.cn.mdx` for Chinese:
# Nextra's SWR and Next.js sites, many VuePress ones); no language has these codes.
_COUNTRY_NAMED = {"cn": "zh-CN", "tw": "zh-TW", "jp": "ja", "kr": "ko"}


def _folder_tag(name: str) -> tuple[str, bool] | None:
    """(normalised tag, needs a sibling locale folder) for a locale-shaped
    folder name of a known language, or a country code sites use for one
    (`cn`: as a bare code that is also a word); None for any other name."""
    if named := _COUNTRY_NAMED.get(name.lower()):
        return named, True
    shape = _FOLDER_TAG.fullmatch(name.lower())
    if shape is None or shape["language"] not in _KNOWN_LANGUAGES:
        return None
    if shape["script"] and shape["script"] not in _KNOWN_SCRIPTS:
        return None
    tag = normalize_tag(name)
    if tag is None:
        return None
    bare = not (shape["script"] or shape["region"])
    return tag, bare and shape["language"] in _AMBIGUOUS_LANGUAGES


def _has_script_or_region(name: str) -> bool:
    """Whether a locale-shaped name has a script or region part (`zh_CN`,
    `pt-BR`, `zh-Hans`, `es-419`), read by the folder rule's own shape."""
    shape = _FOLDER_TAG.fullmatch(name.lower())
    return shape is not None and bool(shape["script"] or shape["region"])


def _locale_folders(names: Iterable[str]) -> dict[str, str]:
    """Folder name → tag for the locale folders among one folder's subfolders."""
    shaped = {name: found for name in names if (found := _folder_tag(name))}
    # An ambiguous code counts only beside a folder that is a locale on its own.
    has_sure_sibling = any(not needs_sibling for _, needs_sibling in shaped.values())
    return {
        name: tag
        for name, (tag, needs_sibling) in shaped.items()
        if has_sure_sibling or not needs_sibling
    }


class PathLocales:
    """The locale folders of one folder tree, from its pages' relative paths.

    A folder name is a locale when it has the shape of a tag (a language,
    then an optional script, then an optional region: `en`, `zh-CN`,
    `zh_Hans`, `pt-BR`, `es-419`, any case), the language is a known one
    (`go`, `api`, `js` are not), a script subtag is a known script (so
    `en-docs` is no locale), and, for a bare code that is also a common
    folder name (`it`, `id`, `ml`, `no`, ...), a sibling folder is a locale
    on its own: `it/` beside `en/` is Italian, `it/` alone is a folder.
    The first locale folder from the root is the page's: `content/zh-CN/a.md`
    is zh-CN.

    A page in no locale folder may carry its locale in its file name, as Hugo,
    dumi and mkdocs-static-i18n name translations: `README.en-US.md` beside
    `README.md`, `index.zh-CN.md` beside `index.en-US.md` (`_named_locales`).
    """

    def __init__(self, relpaths: Iterable[str]) -> None:
        subfolders: dict[str, set[str]] = defaultdict(set)
        paths = list(relpaths)
        for relpath in paths:
            folders = relpath.split("/")[:-1]
            for depth, name in enumerate(folders):
                subfolders["/".join(folders[:depth])].add(name)
        self._locales = {parent: _locale_folders(names) for parent, names in subfolders.items()}
        self._named = _named_locales(paths)

    def _locale_folder(self, relpath: str) -> tuple[int, str] | None:
        """(depth, tag) of the first locale folder on the page's path."""
        folders = relpath.split("/")[:-1]
        for depth, name in enumerate(folders):
            tag = self._locales.get("/".join(folders[:depth]), {}).get(name)
            if tag:
                return depth, tag
        return None

    def locale_of(self, relpath: str) -> str | None:
        found = self._locale_folder(relpath)
        if found:
            return found[1]
        named = self._named.get(relpath)
        return named[0] if named else None

    def neutral_path(self, relpath: str) -> str:
        """The path without its locale folder: `zh-CN/guide/a.md` → `guide/a.md`,
        which `en/guide/a.md` shares (a Docusaurus translation under `i18n/`:
        the path of the page it translates, `_docusaurus_source`); or without
        the locale in its file name: `guide/a.en-US.md` → `guide/a.md`."""
        found = self._locale_folder(relpath)
        if found is None:
            named = self._named.get(relpath)
            return named[1] if named else relpath
        parts = relpath.split("/")
        return _docusaurus_source(posixpath.join(*parts[: found[0]], *parts[found[0] + 1 :]))


# Docusaurus keeps a translation under `i18n/<locale>/<plugin>/…`, away from the
# page it translates: docs' `current/` (and `version-X/`), the blog, the pages.
_DOCUSAURUS = re.compile(
    r"(?P<root>(?:.*/)?)i18n/docusaurus-plugin-content-(?P<plugin>docs|blog|pages)/(?P<rest>.+)"
)
_DOCUSAURUS_PLUGIN_PATHS = {"blog": "blog/", "pages": "src/pages/"}


def _docusaurus_source(path: str) -> str:
    """A Docusaurus translation's path (its locale folder already out) as the
    path of the page it translates: `i18n/docusaurus-plugin-content-docs/
    current/intro.md` → `docs/intro.md`, `…-docs/version-2.0/a.md` →
    `versioned_docs/version-2.0/a.md`, `…-blog/x.md` → `blog/x.md`, `…-pages/
    y.md` → `src/pages/y.md` (Docusaurus's default folders); any other path
    as it is."""
    found = _DOCUSAURUS.fullmatch(path)
    if found is None:
        return path
    root, plugin, rest = found["root"], found["plugin"], found["rest"]
    if plugin != "docs":
        return root + _DOCUSAURUS_PLUGIN_PATHS[plugin] + rest
    version, _, inside = rest.partition("/")
    if not inside:
        return path
    if version == "current":
        return f"{root}docs/{inside}"
    return f"{root}versioned_docs/{rest}" if version.startswith("version-") else path


def _named_locales(relpaths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Page path → (tag, path without the tag) for the pages whose file name
    ends in a locale tag before its format: `README.en-US.md`. As with folders
    the rule is conservative, since a dotted name part may be a version or a
    word (`setup.py.md`, `notes.it.md`): the part must have a tag's shape and
    name a known language (`_folder_tag`), and another page of the same folder
    must share the name without it (`README.md`, `README.zh-CN.md`): a
    translation always has a twin, unless its tag has a script or a region
    (`README.zh_CN`, `guide.pt-BR.md`), a shape no version or word has. A
    bare code that is also a common word (`it`, `no`, ...) needs a twin whose
    tag is a locale on its own; a country code sites name a language by
    (`cn`) does not."""
    tagged: dict[str, tuple[str, str, bool]] = {}  # path → (tag, neutral path, needs a sure twin)
    twins: dict[str, list[str]] = defaultdict(list)  # neutral path → its pages
    named: dict[str, tuple[str, str]] = {}
    for relpath in relpaths:
        folder, _, name = relpath.rpartition("/")
        stem = page_stem(name)
        base, dot, part = stem.rpartition(".")
        found = _folder_tag(part) if dot and base else None
        neutral = posixpath.join(folder, base + name[len(stem) :])
        if found is not None and _has_script_or_region(part):
            # `README.zh_CN`, `guide.pt-BR.md`: no version or word has that
            # shape, and a page's locale must not hang on its twin being
            # there (removing `README` re-keyed `README.zh_CN` as `zh`).
            named[relpath] = (found[0], neutral)
        elif found is not None:
            # A country code in a file name is no word: `guide.cn.mdx` beside
            # `guide.mdx` is a Chinese twin.
            needs_sure_twin = found[1] and part.lower() not in _COUNTRY_NAMED
            tagged[relpath] = (found[0], neutral, needs_sure_twin)
            twins[neutral].append(relpath)
        else:
            twins[relpath].append(relpath)
    for relpath, (tag, neutral, needs_sure_twin) in tagged.items():
        others = [p for p in twins[neutral] if p != relpath]
        sure = [p for p in others if p in tagged and not tagged[p][2]]
        if sure if needs_sure_twin else others:
            named[relpath] = (tag, neutral)
    return named


# ------------------------------------------------------------------ script

_SAMPLE_CHARS = 50_000  # enough text to tell; a huge page costs no more
_MIN_UNITS = 5
_KANA_SHARE = 0.10
# A code fence's opening line; its block runs to a line of the same run alone.
# Read line by line (`_without_fenced_code`): one pattern over the whole text
# searched from every opening line to the end (`x` + a newline, 10,000 times:
# 5-9 s of a folder's load).
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_URL = re.compile(r"(?<!\S)\S+://\S+")  # tried from word starts only: linear
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")


def script_locale(text: str) -> str | None:
    """`zh`, `ja`, `ko` or `en` by the script of a page's prose, else None.

    Code blocks, inline code and URLs are left out first: code is written
    in English whatever the page's language. Then every Han, Kana or Hangul
    character counts as one unit and every word of letters as one unit, as
    in the Retriever's query-language rule (services.core.analysis.language).
    Thresholds, and why:

    - fewer than 5 units: None. A page of code, numbers or a two-word stub
      says nothing, and the loader's default is a better guess than noise.
    - CJK characters are at least half of the units: a CJK page. A Chinese
      word is one to three characters, so counting characters gives CJK a
      mild edge on purpose: Chinese and Japanese pages quote English names,
      commands and identifiers all the time; English pages rarely quote CJK.
      Then kana at least 10% of the CJK characters: `ja` (Japanese prose is
      roughly 40-70% kana, Chinese has none, so a Chinese page may quote a
      Japanese name and stay `zh`); else more Hangul than Han: `ko` (Korean
      may carry a little Hanja); else `zh`.
    - Latin words are at least half of the units: `en`. A script cannot tell
      English from French; a French page needs its `lang`, folder or flag.
    - anything else (Cyrillic, Arabic, a mix with no majority): None, since
      a script shared by many languages names none of them for sure.
    """
    sample = _prose(text[:_SAMPLE_CHARS])
    han, kana, hangul = (len(p.findall(sample)) for p in (HAN_CHAR, KANA_CHAR, HANGUL_CHAR))
    cjk = han + kana + hangul
    words = OTHER_WORD.findall(sample)  # letters of any non-CJK script
    latin = sum(1 for word in words if _LATIN_WORD.fullmatch(word))
    units = cjk + len(words)
    if units < _MIN_UNITS:
        return None
    if 2 * cjk >= units:
        if kana >= _KANA_SHARE * cjk:
            return "ja"
        return "ko" if hangul > han else "zh"
    return "en" if 2 * latin >= units else None


def _prose(text: str) -> str:
    text = _without_fenced_code(text)
    for code in (_INLINE_CODE, _URL):
        text = code.sub(" ", text)
    return text


def _without_fenced_code(text: str) -> str:
    """`text` without its closed fenced code blocks (each becomes a blank
    line; as in CommonMark, a block closes at a line of its fence's character
    at least as long as its opening run); a fence never closed stays."""
    kept: list[str] = []
    block: list[str] = []  # the open block's lines, its opening line first
    fence = ""
    for line in text.split("\n"):
        if fence and _closes(line.strip(" \t"), fence):
            kept.append(" ")
            block, fence = [], ""
        elif fence:
            block.append(line)
        elif opened := _FENCE_OPEN.match(line):
            block, fence = [line], opened.group(1)
        else:
            kept.append(line)
    return "\n".join(kept + block)


def _closes(line: str, fence: str) -> bool:
    return len(line) >= len(fence) and line == fence[0] * len(line)
