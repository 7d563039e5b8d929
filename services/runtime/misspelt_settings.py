"""A RAG_* variable no process reads, close to one that is: a likely typo.

pydantic-settings ignores variables it does not know, so `RAG_RETRIEVER_TOPK=5`
(for `RAG_DEFAULT_TOP_K`) or `RAG_RERANK_MODLE=...` starts the service with the
default, silently. Every process checks its environment at start against
every name the project reads (`known_settings`, generated with the
configuration docs) and names each near miss with the setting it probably
meant. Only near misses: a deployment's own RAG_* variables (an image tag, a
script's setting) resemble no setting and are left alone.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.core.environment import ENV_PREFIX
from services.runtime.known_settings import KNOWN_SETTINGS, UNPREFIXED_SETTINGS

# difflib's ratio: a dropped or doubled letter, an underscore missing or
# added, two letters swapped in a name of 15+ characters score 0.9 or more;
# two real settings that share a prefix (RAG_PEER_TOKEN against
# RAG_INDEXER_TOKEN) about 0.75.
CLOSE_ENOUGH = 0.85


@dataclass(frozen=True)
class Misspelt:
    variable: str  # as set
    meant: str  # the closest known name

    def message(self) -> str:
        return f"{self.variable} is not a setting any service reads; did you mean {self.meant}?"


def misspelt_settings(
    environ: Mapping[str, str] | None = None, known: Iterable[str] = KNOWN_SETTINGS
) -> list[Misspelt]:
    """Each RAG_* variable of `environ` (the process's by default) that no
    process reads and that is close to one that is, in name order."""
    environ = os.environ if environ is None else environ
    names = frozenset(known)
    found = []
    for variable in sorted(environ):
        upper = variable.upper()  # the settings read names in any case
        if not upper.startswith(ENV_PREFIX) or upper in names:
            continue
        unprefixed = upper[len(ENV_PREFIX) :]
        if unprefixed in UNPREFIXED_SETTINGS:  # RAG_QDRANT_API_KEY: read without the prefix
            found.append(Misspelt(variable, unprefixed))
            continue
        close = difflib.get_close_matches(upper, sorted(names), n=1, cutoff=CLOSE_ENOUGH)
        if close:
            found.append(Misspelt(variable, close[0]))
    return found
