"""A RetrieveRequest as the pipeline's RetrievalRequest: its fields decoded
and its bounds checked before any work is done. Every refusal is an
InvalidArgument naming the field and the limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.errors import InvalidArgument
from services.core.field_rules import (
    MAX_LANGUAGE_TAG_CHARS,
    MAX_METADATA_VALUE_CHARS,
    canonical_language_tag,
    hidden_character_problem,
    language_tag_problem,
    metadata_key_problem,
    scope_id_problem,
)
from services.core.models import ScopeFilter
from services.core.web_url import url_identity_problem
from services.retriever.boost_proto import boosts_from_proto
from services.retriever.diversity import Diversity
from services.retriever.fusion import validate_weights
from services.retriever.requests import RetrievalRequest
from services.retriever.score_fusion import FusionMethod
from services.retriever.types import Channel, Intent
from services.runtime.security.callers import Caller
from services.runtime.security.scopes import readable_scope, readable_scopes

CHANNELS_TO_PROTO = {
    Channel.VECTOR: pb.CHANNEL_VECTOR,
    Channel.LEXICAL: pb.CHANNEL_LEXICAL,
    Channel.CROSS_LINGUAL: pb.CHANNEL_CROSS_LINGUAL,
}
INTENTS_TO_PROTO = {
    Intent.SITE_SEARCH: pb.INTENT_SITE_SEARCH,
    Intent.CURRENT_PAGE: pb.INTENT_CURRENT_PAGE,
}
_FUSION_OF_PROTO: dict[int, FusionMethod] = {
    pb.FUSION_METHOD_RRF: FusionMethod.RRF,
    pb.FUSION_METHOD_MIN_MAX: FusionMethod.MIN_MAX,
    pb.FUSION_METHOD_DBSF: FusionMethod.DBSF,
}
_CHANNEL_OF_PROTO: dict[int, Channel] = {int(v): k for k, v in CHANNELS_TO_PROTO.items()}
_INTENT_OF_PROTO: dict[int, Intent] = {int(v): k for k, v in INTENTS_TO_PROTO.items()}


@dataclass(frozen=True)
class RequestLimits:
    """Bounds of a Retrieve request, checked before any work is done (the
    Retriever settings of the same names)."""

    max_raw_query_chars: int = 100_000
    max_page_url_chars: int = 2048
    max_filter_doc_ids: int = 1000
    max_filter_urls: int = 1000
    max_filter_value_chars: int = 2048
    max_filter_metadata_entries: int = 64
    max_filter_metadata_key_chars: int = 128
    max_filter_scope_id_chars: int = 128
    max_filter_scope_ids: int = 64

    @classmethod
    def from_settings(cls, settings: Any) -> RequestLimits:
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


def request_from_proto(
    msg: pb.RetrieveRequest, limits: RequestLimits, caller: Caller
) -> RetrievalRequest:
    """The domain request, in the scope(s) `caller` may read; InvalidArgument
    naming the field and the limit for anything out of bounds, before any
    work (a bounded query and filter keep every later step cheap), and
    PermissionDenied for a scope outside the caller's grant."""
    check_request(msg, limits)
    # The enumerations first, the weights and boosts (checked by the modules
    # that own their rules) last: each module is entered once.
    channels, intent, fusion = (
        _channels(msg.channels),
        _intent(msg.intent),
        _fusion(msg.fusion.method),
    )
    weights, boosts = request_weights(msg.weights), boosts_from_proto(msg.boosts)
    f = msg.filter
    asked = ScopeFilter(
        scope_id=f.scope_id,
        scope_ids=tuple(f.scope_ids),
        locale=canonical_language_tag(f.locale),
        doc_ids=tuple(f.doc_ids),
        urls=tuple(f.urls),
        metadata=tuple(sorted(f.metadata.items())),
    )
    scope = readable(asked, caller)
    return RetrievalRequest(
        query=msg.query,
        top_k=msg.top_k,
        scope=scope,
        page_url=msg.page_url,
        debug=msg.debug,
        rerank=not msg.disable_rerank,
        weights=weights,
        max_chunks_per_document=msg.max_chunks_per_document,
        context_char_budget=msg.context_char_budget,
        min_vector_score=msg.min_vector_score,
        candidates_per_channel=msg.candidates_per_channel,
        channels=channels,
        intent=intent,
        query_language=canonical_language_tag(msg.query_language),
        group_by_document=msg.group_by_document,
        page_token=msg.page_token,
        fusion=fusion,
        rrf_k=msg.fusion.rrf_k,
        boosts=boosts,
        diversity=Diversity(msg.diversity.mmr_lambda, msg.diversity.window),
    )


# The most evidence text one answer assembles (RAG_CONTEXT_CHAR_BUDGET's own
# upper bound): a larger budget only grows an answer towards the message limit.
MAX_CONTEXT_CHAR_BUDGET = 200_000


def check_request(msg: pb.RetrieveRequest, limits: RequestLimits) -> None:
    _check_chars("query", msg.query, limits.max_raw_query_chars)
    _check_chars("page_url", msg.page_url, limits.max_page_url_chars)
    _check_url("page_url", msg.page_url)
    _check_language_tag("query_language", msg.query_language)
    if msg.context_char_budget < 0:
        raise InvalidArgument(
            f"context_char_budget: {msg.context_char_budget} must not be negative"
        )
    if msg.context_char_budget > MAX_CONTEXT_CHAR_BUDGET:
        raise InvalidArgument(
            f"context_char_budget: {msg.context_char_budget} is above the limit "
            f"{MAX_CONTEXT_CHAR_BUDGET}"
        )
    check_filter(msg.filter, limits)


def check_filter(f: pb.ScopeFilter, limits: RequestLimits) -> None:
    _check_scope_id("filter.scope_id", f.scope_id, limits)
    _check_language_tag("filter.locale", f.locale)
    if len(f.scope_ids) > limits.max_filter_scope_ids:
        raise InvalidArgument(
            f"filter.scope_ids: {len(f.scope_ids)} values, limit is {limits.max_filter_scope_ids}"
        )
    for index, scope_id in enumerate(f.scope_ids):
        if not scope_id:
            raise InvalidArgument(f"filter.scope_ids[{index}]: empty")
        _check_scope_id(f"filter.scope_ids[{index}]", scope_id, limits)
    if f.scope_id and f.scope_ids:
        raise InvalidArgument(
            "filter.scope_ids: give filter.scope_id or filter.scope_ids, not both"
        )
    _check_list("filter.doc_ids", f.doc_ids, limits.max_filter_doc_ids, limits)
    _check_list("filter.urls", f.urls, limits.max_filter_urls, limits)
    for index, url in enumerate(f.urls):
        _check_url(f"filter.urls[{index}]", url)
    if len(f.metadata) > limits.max_filter_metadata_entries:
        raise InvalidArgument(
            f"filter.metadata: {len(f.metadata)} entries, "
            f"limit is {limits.max_filter_metadata_entries}"
        )
    for key, value in f.metadata.items():
        _check_chars("filter.metadata key", key, limits.max_filter_metadata_key_chars)
        # The Indexer refuses keys that are blank or hold `=`, so a filter on
        # one could only match nothing: a caller's mistake (an unset variable,
        # a "k=v" pasted whole).
        if (problem := metadata_key_problem(key)) is not None:
            raise InvalidArgument(f"filter.metadata key {key[:40]!r}: {problem}")
        # A document's value holds at most MAX_METADATA_VALUE_CHARS: a longer
        # one could only match nothing.
        _check_chars(f"filter.metadata[{key!r}]", value, MAX_METADATA_VALUE_CHARS)
        _check_one_line(f"filter.metadata[{key!r}]", value, line_breaks=True)


def _check_list(field: str, values: Sequence[str], limit: int, limits: RequestLimits) -> None:
    if len(values) > limit:
        raise InvalidArgument(f"{field}: {len(values)} values, limit is {limit}")
    for index, value in enumerate(values):
        _check_chars(f"{field}[{index}]", value, limits.max_filter_value_chars)


def _check_chars(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{field}: {len(value)} characters, limit is {limit}")


def _check_language_tag(field: str, tag: str) -> None:
    """Empty, or a well-formed BCP 47 tag (services.core.field_rules)."""
    _check_chars(field, tag, MAX_LANGUAGE_TAG_CHARS)
    problem = language_tag_problem(tag) if tag else None
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _check_scope_id(field: str, scope_id: str, limits: RequestLimits) -> None:
    """As long and as written as a document's scope may be ("" filters nothing):
    a filter on any other name could only match nothing, silently."""
    _check_chars(field, scope_id, limits.max_filter_scope_id_chars)
    _check_one_line(field, scope_id)
    if scope_id and (problem := scope_id_problem(scope_id)) is not None:
        raise InvalidArgument(f"{field}: {scope_id[:40]!r} {problem}")


def _check_one_line(field: str, value: str, line_breaks: bool = False) -> None:
    """No control or format character (a metadata value may break lines)."""
    problem = hidden_character_problem(value, line_breaks=line_breaks)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _check_url(field: str, url: str) -> None:
    """No credentials, no mixed-script host (services.core.web_url): any
    scheme, since the page a user is on need not be a web page."""
    problem = url_identity_problem(url)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _intent(value: int) -> Intent | None:
    """INTENT_UNSPECIFIED routes by rules; an unknown number is the caller's mistake."""
    if value == pb.INTENT_UNSPECIFIED:
        return None
    if value not in _INTENT_OF_PROTO:
        raise InvalidArgument(f"intent: unknown value {value}")
    return _INTENT_OF_PROTO[value]


def _fusion(value: int) -> FusionMethod | None:
    """FUSION_METHOD_UNSPECIFIED: the server's default."""
    if value == pb.FUSION_METHOD_UNSPECIFIED:
        return None
    if value not in _FUSION_OF_PROTO:
        raise InvalidArgument(f"fusion.method: unknown value {value}")
    return _FUSION_OF_PROTO[value]


def _channels(requested: Sequence[int]) -> frozenset[Channel]:
    unknown = [c for c in requested if c not in _CHANNEL_OF_PROTO]
    if unknown:
        raise InvalidArgument(f"channels: unknown channel value(s) {unknown}")
    return frozenset(_CHANNEL_OF_PROTO[c] for c in requested) or frozenset(Channel)


def request_weights(msg: pb.ChannelWeights) -> dict[Channel, float] | None:
    """The channels the request weighs; 0 means "the configured default"
    (RAG_VECTOR_WEIGHT, RAG_LEXICAL_WEIGHT, RAG_CROSS_LINGUAL_WEIGHT, applied
    at fusion), so clients that never set weights get the configured fusion."""
    given = {
        channel: weight
        for channel, weight in (
            (Channel.VECTOR, msg.vector),
            (Channel.LEXICAL, msg.lexical),
            (Channel.CROSS_LINGUAL, msg.cross_lingual),
        )
        if weight != 0.0
    }
    return validate_weights(given) or None


def readable(scope: ScopeFilter, caller: Caller) -> ScopeFilter:
    """The scope(s) the read runs in, each checked against the caller's grant;
    one scope asked for in scope_ids is searched as scope_id."""
    if not scope.scope_ids:
        return replace(scope, scope_id=readable_scope(scope.scope_id, caller))
    scope_ids = readable_scopes(scope.scope_ids, caller)
    if len(scope_ids) == 1:
        return replace(scope, scope_id=scope_ids[0], scope_ids=())
    return replace(scope, scope_ids=scope_ids)
