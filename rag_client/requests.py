"""RetrieveRequest from keyword arguments.

Limits (top_k 1..50, filter sizes, ...) are checked by the server, which
answers INVALID_ARGUMENT naming the field (raised as InvalidRequest); the
client only checks what Python can: types and field names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb


def not_one_string(field: str, values: object) -> None:
    """TypeError for a str (or bytes) where a list of strings is meant: a
    string is iterable, so scope_ids="docs" searched scopes d, o, c and s, and
    delete("guide.md") deleted documents g, u, i, ... (probes)."""
    if isinstance(values, str | bytes):
        shown = values if len(values) <= 80 else values[:80]
        raise TypeError(f"{field}: expected a list of strings, got one string {shown!r}")


def scope_filter(
    *,
    scope_id: str = "",
    scope_ids: Iterable[str] = (),
    locale: str = "",
    doc_ids: Iterable[str] = (),
    urls: Iterable[str] = (),
    metadata: Mapping[str, str] | None = None,
) -> rpb.ScopeFilter | None:
    """A ScopeFilter, or None when every part is empty (no filtering)."""
    lists = {"scope_ids": scope_ids, "doc_ids": doc_ids, "urls": urls}
    for name, values in lists.items():
        not_one_string(f"ScopeFilter.{name}", values)
    scope_ids, doc_ids, urls = list(scope_ids), list(doc_ids), list(urls)
    if not (scope_id or scope_ids or locale or doc_ids or urls or metadata):
        return None
    fields: dict[str, Any] = {"scope_id": scope_id, "scope_ids": scope_ids, "locale": locale}
    fields |= {"doc_ids": doc_ids, "urls": urls, "metadata": metadata or {}}
    return _message(rpb.ScopeFilter, fields)


def _message(kind: type[Any], fields: Mapping[str, Any]) -> Any:
    """kind(**fields), a wrong name or type raised as TypeError naming the field."""
    known = {f.name for f in kind.DESCRIPTOR.fields}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {unknown[0]!r}")
    try:
        return kind(**fields)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{kind.__name__}.{_culprit(kind, fields)}: {exc}") from None


def _culprit(kind: type[Any], fields: Mapping[str, Any]) -> str:
    """The first field whose value the message refuses on its own."""
    for name, value in fields.items():
        try:
            kind(**{name: value})
        except (TypeError, ValueError):
            return name
    return "?"


SCOPE_KEYS = ("scope_id", "scope_ids", "locale", "doc_ids", "urls", "metadata")


class RetrieveOptions(TypedDict, total=False):
    """Keyword arguments of `retrieve` (RetrieveRequest's fields, documented in
    protos/rag/retriever/v1/retriever.proto; the scope keywords build its
    `filter`). A field left out is the server's default."""

    top_k: int
    filter: rpb.ScopeFilter
    scope_id: str
    scope_ids: Iterable[str]
    locale: str
    doc_ids: Iterable[str]
    urls: Iterable[str]
    metadata: Mapping[str, str]
    page_url: str
    debug: bool
    disable_rerank: bool
    weights: rpb.ChannelWeights
    max_chunks_per_document: int
    context_char_budget: int
    min_vector_score: float
    candidates_per_channel: int
    channels: Iterable[rpb.Channel.ValueType]
    intent: rpb.Intent.ValueType
    query_language: str
    group_by_document: bool
    page_token: str
    fusion: rpb.Fusion
    boosts: rpb.Boosts
    diversity: rpb.Diversity


def retrieve_request(query: str | rpb.RetrieveRequest, **options: Any) -> rpb.RetrieveRequest:
    """The request for `query` (a str) with RetrieveOptions, or `query` itself
    when it is already a RetrieveRequest (then no option may be given)."""
    if isinstance(query, rpb.RetrieveRequest):
        if options:
            raise TypeError("give a prepared RetrieveRequest or keyword options, not both")
        return query
    if not isinstance(query, str):
        raise TypeError(f"query: expected a str or a RetrieveRequest, got {type(query).__name__}")
    scope = {k: options.pop(k) for k in SCOPE_KEYS if k in options}
    if scope and "filter" in options:
        raise TypeError(f"give filter= or the scope keywords ({', '.join(scope)}), not both")
    chosen = options.pop("filter", None)
    if chosen is None:
        chosen = scope_filter(**scope)
    if chosen is not None:
        options["filter"] = chosen
    return _message(rpb.RetrieveRequest, {"query": query, **options})  # type: ignore[no-any-return]
