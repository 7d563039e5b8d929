"""The lists a request ranks apart: one per language its scope holds, not one
per locale tag (services.retriever.locale_balance).

A scope may hold one language under several tags: `en` pages beside `en-US`
ones (a generator's `<html lang="en-US">` beside Markdown pages that declare
nothing), `zh` beside `zh-CN`. Ranked apart per tag, an English question's
`en` and `en-US` lists took turns, so the best `en-US` page came second
whatever its relevance, and a scope of English pages only paid for the
searches of a bilingual one. Turns are for crossing languages, so a list is
a language:

- locales are ranked apart only when the scope's tags name more than one
  language;
- a language's tags are searched each (the stores filter by one locale) and
  their hits merged by score: one query vector (or one BM25 query over one
  index) gives scores that compare across tags;
- a list is named by its tag when its language has one tag in the scope
  (`zh-CN`, as before), else by the language (`en` for `en` + `en-US`); a
  page is in the list of its language (`in_list`), whatever its tag;
- a scope of more than `MAX_LANGUAGES_APART` languages, or `MAX_TAGS_APART`
  tags, is ranked as one list: each list costs its searches and a fusion
  per request, and a writer of one scope could upsert pages under a
  thousand tags (a probe: 1,500 languages took 4.8 s of fusion per
  Retrieve, on the event loop every other request waits for).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.core.analysis import primary_language
from services.core.exact_match import lead_holder
from services.core.models import ScoredChunk

# Documentation sites translate into a dozen or two languages (Python's docs:
# 12 with English); each list ranked apart is a search per tag and a fusion.
MAX_LANGUAGES_APART = 24
MAX_TAGS_APART = 48


@dataclass(frozen=True)
class LocaleGroups:
    """The lists to rank apart (their names, in order) and each one's tags;
    for a request whose locale filter names none of the scope's tags exactly,
    the tags it selects instead (`widened_filter`; empty: the filter as given)."""

    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    filter_tags: tuple[str, ...] = ()
    # Languages and tags of a scope too crowded to rank apart (0: it was not).
    crowded: tuple[int, int] = (0, 0)

    @classmethod
    def of(cls, locales: Iterable[str]) -> LocaleGroups:
        """The groups of the tags a scope holds; none when they name one
        language (or none), or too many: the request is then ranked as one list."""
        by_language: dict[str, list[str]] = {}
        tags = sorted(set(locales) - {""})
        for tag in tags:
            by_language.setdefault(primary_language(tag), []).append(tag)
        if len(by_language) < 2:
            return cls()
        if len(by_language) > MAX_LANGUAGES_APART or len(tags) > MAX_TAGS_APART:
            return cls(crowded=(len(by_language), len(tags)))
        return cls({_name(lang, tags): tuple(tags) for lang, tags in by_language.items()})

    def crowded_note(self) -> str:
        """Why a scope of several languages was ranked as one list ("": it was not)."""
        languages, tags = self.crowded
        if not languages:
            return ""
        return (
            f"locales ranked as one list: the scope holds {languages} languages under {tags} "
            f"tags, more than are ranked apart ({MAX_LANGUAGES_APART} languages, "
            f"{MAX_TAGS_APART} tags)"
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.tags)

    def tags_of(self, name: str) -> tuple[str, ...]:
        """The tags searched for the list `name` (a name not grouped: itself)."""
        return self.tags.get(name, (name,))

    def name_of(self, locale: str) -> str | None:
        """The list a page of `locale` belongs to (None: no list holds it)."""
        return list_of(locale, self.tags)


def widened_filter(wanted: str, held: Iterable[str]) -> tuple[str, ...]:
    """The tags a locale filter of `wanted` selects among a scope's `held`
    ones when none is `wanted` itself: those of its language that it widens
    or narrows, subtag by subtag (`zh` selects `zh-CN` and `zh-Hans`, `zh-CN`
    selects `zh`, never `zh-TW`), as BCP 47 filtering and lookup's fallback
    to a shorter tag would. A caller asking for `zh-CN` on a site whose
    Chinese pages say `zh` (the loader's reading of their script) meant
    those pages, not none. () when `wanted` is held, or nothing matches."""
    held = set(held)
    if not wanted or wanted in held:
        return ()
    asked = wanted.lower().split("-")

    def selected(tag: str) -> bool:
        parts = tag.lower().split("-")
        shared = min(len(parts), len(asked))
        return bool(tag) and parts[:shared] == asked[:shared]

    # Bounded as the lists ranked apart are: each tag is a search of its own.
    return tuple(sorted(tag for tag in held if selected(tag)))[:MAX_TAGS_APART]


def _name(language: str, tags: Sequence[str]) -> str:
    return tags[0] if len(tags) == 1 else language


def in_list(name: str, locale: str) -> bool:
    """Whether a page of `locale` belongs to the list `name`: lists are
    languages, so the same primary language (`en-US` is in `en`'s list)."""
    return primary_language(locale) == primary_language(name)


def list_of(locale: str, names: Iterable[str]) -> str | None:
    """Which of the lists `names` a page of `locale` belongs to (`in_list`)."""
    return next((name for name in names if in_list(name, locale)), None)


def merged_by_score(lists: Sequence[list[ScoredChunk]], limit: int) -> list[ScoredChunk]:
    """Lists searched with one query under different filters, as one list:
    best score first (the hit holding the most exact identifiers first, as
    each store placed it: services.core.exact_match), each chunk once, at
    most `limit`. A single list is returned as it is."""
    if len(lists) == 1:
        return lists[0][:limit]
    # A chunk has one locale, so it is in one of the lists at most.
    distinct = {hit.chunk.chunk_id: hit for hits in lists for hit in hits}
    by_score = sorted(distinct.values(), key=lambda hit: (-hit.score, hit.chunk.chunk_id))
    return lead_holder(by_score)[:limit]


def distinct_hits(hits: list[ScoredChunk]) -> list[ScoredChunk]:
    """Each chunk once, where it first appears."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.chunk.chunk_id not in seen:
            seen.add(hit.chunk.chunk_id)
            kept.append(hit)
    return kept
