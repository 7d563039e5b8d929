"""A Retrieve's first steps, before any channel runs: the request checked,
normalized, routed and analysed (`QueryPreparer`), and its scope limited to
the committed rows (`CommittedScope`)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import replace

from services.core.analysis.analyzer import TextAnalyzer
from services.core.analysis.query_shape import query_shape
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, InvalidArgument
from services.core.models import ScopeFilter
from services.retriever.language import LanguageRule, check_language
from services.retriever.query import QueryNormalizer
from services.retriever.requests import (
    PreparedQuery,
    RetrievalConfig,
    RetrievalRequest,
    check_limits,
)
from services.retriever.routing import IntentRouter
from services.retriever.types import HYBRID, Channel, Intent
from services.storage.visibility import CommittedGeneration


class QueryPreparer:
    """A request made into what the channels run: InvalidArgument naming the
    field for a request out of bounds."""

    def __init__(
        self, config: RetrievalConfig, analyzer: TextAnalyzer, language_rule: LanguageRule
    ) -> None:
        """`analyzer`: the lexical index's own analysis, so identifiers and
        highlights are found exactly as the index found them."""
        self.config, self.analyzer, self.language_rule = config, analyzer, language_rule
        self.normalizer = QueryNormalizer(config.max_query_chars)
        self.router = IntentRouter()

    def prepare(self, request: RetrievalRequest) -> PreparedQuery:
        query = self.normalizer.normalize(request.query)
        top_k, depth = check_limits(request, self.config)
        intent = request.intent or self.router.route(query, request.page_url)
        if intent is Intent.CURRENT_PAGE and not request.page_url.strip():
            raise InvalidArgument("intent: current_page needs page_url")
        scope = request.scope
        if intent is Intent.CURRENT_PAGE:
            scope = current_page_scope(scope, request.page_url)
        plan = self.analyzer.plan(query)
        language = self.language_rule.decide(
            query,
            check_language(request.query_language),
            scope.locale,
            vector_requested=Channel.VECTOR in request.channels,
            hybrid=request.channels >= HYBRID,
        )
        channels = request.channels
        if language.skip_vector:
            channels = channels - {Channel.VECTOR}
        shape = query_shape(query)
        return PreparedQuery(query, plan, intent, scope, top_k, depth, language, channels, shape)


def current_page_scope(scope: ScopeFilter, page_url: str) -> ScopeFilter:
    """The request's scope narrowed to the page, never widened: its doc_ids
    still hold (the stores match both), and a page outside its urls is
    refused. The urls used to be replaced, and doc_ids dropped, so a filter a
    gateway sets as an allow-list was bypassed by naming another page (probe)."""
    if scope.urls and page_url not in scope.urls:
        raise InvalidArgument(
            "page_url: not among filter.urls (a current-page request reads its page only "
            "where the filter allows it)"
        )
    return replace(scope, urls=(page_url,))


class CommittedScope:
    """Limits a scope to the committed rows (services.storage.visibility)."""

    def __init__(
        self,
        committed: CommittedGeneration | None,
        executor: Executor,
        max_reread_s: float | None = None,
    ) -> None:
        """`committed` None: every row may be served (tests of the pipeline
        alone); `max_reread_s`: the longest a re-read with a value to fall
        back on may take (the Retriever's channel timeout: no longer than a
        search itself; None: half the time left)."""
        self.committed, self.executor = committed, executor
        self.max_reread_s = max_reread_s

    async def visible(self, scope: ScopeFilter, deadline: Deadline) -> ScopeFilter:
        """`scope` at the committed generation; a re-read of the commit point
        is bounded by the request's deadline."""
        if self.committed is None:
            return scope
        generation = self.committed.cached()
        if generation is None:
            # With a value to fall back on, a re-read (a locked or slow store)
            # may take half the time left, not all of it: the search still
            # has to run and answer within the deadline.
            read_by = deadline
            if self.committed.last() is not None:
                share = deadline.remaining_s() / 2
                read_by = deadline.capped(min(share, self.max_reread_s or share))
            loop = asyncio.get_running_loop()
            read = loop.run_in_executor(self.executor, self.committed.current, read_by)
            try:
                generation = await asyncio.wait_for(read, read_by.timeout_or_none())
            except TimeoutError as exc:
                # As a failed re-read: the last value read only hides newer rows.
                generation = self.committed.last()
                if generation is None:
                    raise DeadlineExceeded("reading the commit point ran out of time") from exc
        return replace(scope, visible_generation=generation)
