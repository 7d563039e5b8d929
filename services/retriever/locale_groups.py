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
  page is in the list of its language (`in_list`), whatever its tag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.core.analysis import primary_language
from services.core.exact_match import lead_holder
from services.core.models import ScoredChunk


@dataclass(frozen=True)
class LocaleGroups:
    """The lists to rank apart (their names, in order) and each one's tags;
    for a request whose locale filter names none of the scope's tags exactly,
    the tags it selects instead (`widened_filter`; empty: the filter as given)."""

    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    filter_tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, locales: Iterable[str]) -> LocaleGroups:
        """The groups of the tags a scope holds; none when they name one
        language (or none): the request is then ranked as one list."""
        by_language: dict[str, list[str]] = {}
        for tag in sorted(set(locales) - {""}):
            by_language.setdefault(primary_language(tag), []).append(tag)
        if len(by_language) < 2:
            return cls()
        return cls({_name(lang, tags): tuple(tags) for lang, tags in by_language.items()})

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

    return tuple(sorted(tag for tag in held if selected(tag)))


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
