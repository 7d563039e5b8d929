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


# Names that look like settings of one service but are read under another
# name (the ratio pointed RAG_GATEWAY_HOST at RAG_GATEWAY_PORT; probe).
_SLIPS = {
    "RAG_GATEWAY_HOST": "RAG_HOST",
    "RAG_PORT": "RAG_INDEXER_PORT, RAG_RETRIEVER_PORT, RAG_RERANKER_PORT or RAG_GATEWAY_PORT",
    "RAG_METRICS_PORT": "RAG_<SERVICE>_METRICS_PORT (RAG_RETRIEVER_METRICS_PORT, ...)",
}


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
        if upper in _SLIPS:
            found.append(Misspelt(variable, _SLIPS[upper]))
            continue
        unprefixed = upper[len(ENV_PREFIX) :]
        if unprefixed in UNPREFIXED_SETTINGS:  # RAG_QDRANT_API_KEY: read without the prefix
            found.append(Misspelt(variable, unprefixed))
            continue
        close = difflib.get_close_matches(upper, sorted(names), n=1, cutoff=CLOSE_ENOUGH)
        if close:
            found.append(Misspelt(variable, close[0]))
        elif shortened := _by_words(upper, names):
            found.append(Misspelt(variable, " or ".join(shortened)))
    return found


def _by_words(name: str, known: frozenset[str]) -> list[str]:
    """Known settings `name` is a word-wise cut of, or an extension of:
    RAG_TLS_CERT for RAG_TLS_CERT_FILE, RAG_GATEWAY_PUBLIC for
    RAG_GATEWAY_PUBLIC_ENABLED, RAG_DATA_DIRECTORY for RAG_DATA_DIR; too short
    for the letter-by-letter ratio (probe). At most three, else none (a
    deployment's own RAG_X_Y that merely shares a prefix)."""
    if name.count("_") < 2:
        return []  # RAG_X: too short to say anything about
    found = sorted(
        other
        for other in known
        if other.startswith(name + "_")
        or (name.startswith(other) and other.count("_") >= 2 and len(name) - len(other) <= 6)
    )
    if not found:  # a middle word left out: RAG_GATEWAY_ORIGINS, RAG_GATEWAY_ENABLED
        service = "_".join(name.split("_")[:2]) + "_"
        last = "_" + name.rpartition("_")[2]
        found = sorted(
            other
            for other in known
            if other.startswith(service) and other.endswith(last) and len(other) > len(name)
        )
    return found if 0 < len(found) <= 3 else []
