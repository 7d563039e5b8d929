"""Text analysis shared by every lexical store and the query path: terms,
exact identifiers, CJK segmentation, the query-language rule and match spans.
Imports nothing from the services (a part of the storage layer's toolkit)."""

from services.core.analysis.analyzer import (
    ANALYSIS_VERSION,
    AnalyzedChunk,
    CjkMode,
    QueryPlan,
    TextAnalyzer,
    Token,
)
from services.core.analysis.highlight import MatchSpan, match_spans
from services.core.analysis.identifiers import (
    IdentifierMatch,
    document_identifiers,
    find_identifiers,
    query_identifiers,
)
from services.core.analysis.language import UNDETERMINED, detect_language
from services.core.analysis.scripts import primary_language

__all__ = [
    "ANALYSIS_VERSION",
    "UNDETERMINED",
    "AnalyzedChunk",
    "CjkMode",
    "IdentifierMatch",
    "MatchSpan",
    "QueryPlan",
    "TextAnalyzer",
    "Token",
    "detect_language",
    "document_identifiers",
    "find_identifiers",
    "match_spans",
    "primary_language",
    "query_identifiers",
]
