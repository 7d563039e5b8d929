"""IntentRouter: explicit, word-boundary-aware current-page rules."""

from __future__ import annotations

import pytest

from services.retriever.routing import CURRENT_PAGE_RULES, IntentRouter, describe_rules
from services.retriever.types import Intent

pytestmark = pytest.mark.unit

PAGE = "https://example.com/guide/setup"
router = IntentRouter()

# (query, rule expected to decide it)
CURRENT_PAGE_CASES = [
    ("summarize this page", "this_page_reference"),
    ("Summarise this article", "this_page_reference"),
    ("SUMMARY OF THIS POST", "this_page_reference"),
    ("what is this page about?", "this_page_reference"),
    ("explain this doc", "this_page_reference"),
    ("explain this document", "this_page_reference"),
    ("which port is used on this page", "this_page_reference"),
    ("what does the current page say about TLS", "this_page_reference"),
    ("summarize this", "summarize_this"),
    ("summarise it", "summarize_this"),
    ("tl;dr this", "summarize_this"),
    ("summary of this", "summarize_this"),
    ("summarize the post", "summarize_this"),
    ("summary", "bare_summary_request"),
    ("Summarize.", "bare_summary_request"),
    ("tl;dr", "bare_summary_request"),
    ("TLDR please", "bare_summary_request"),
    ("give me the key points", "bare_summary_request"),
    ("what's this about", "what_is_this_about"),
    ("what is it about?", "what_is_this_about"),
    ("explain this", "explain_this"),
    ("explain it to me", "explain_this"),
    ("what's discussed here?", "here_reference"),
    ("what is here", "here_reference"),
    ("which flags are mentioned here", "here_reference"),
]

SITE_SEARCH_QUESTIONS = [
    "how do I configure ports",
    "text-embedding-v4 dimensions",
    "how do I summarize text with the API",  # summary verb, but about something else
    "summary of my billing",
    "summaries of all posts",
    "thistle page layout",  # "this" only as part of a word
    "how to create a post",
    "this pages",  # not a page noun at a word boundary
    "how do I get here from the station",
    "click here to download",
    "where is the config file",  # "here" only inside "where"
    "explain this error 429",  # "this" points at the error, not the page
    "what is it about Rust that makes it fast",
    "reposting this postcard",
    "",
]


@pytest.mark.parametrize(("query", "rule"), CURRENT_PAGE_CASES)
def test_current_page_requests_with_a_page_url(query: str, rule: str) -> None:
    decision = router.decide(query, PAGE)
    assert (decision.intent, decision.rule) == (Intent.CURRENT_PAGE, rule)
    assert router.route(query, PAGE) is Intent.CURRENT_PAGE


@pytest.mark.parametrize("query", SITE_SEARCH_QUESTIONS)
def test_general_questions_on_a_page_search_the_site(query: str) -> None:
    decision = router.decide(query, PAGE)
    assert (decision.intent, decision.rule) == (Intent.SITE_SEARCH, "general_question")


@pytest.mark.parametrize("page_url", ["", "   "])
@pytest.mark.parametrize("query", [q for q, _ in CURRENT_PAGE_CASES[:5]])
def test_without_page_url_everything_is_site_search(query: str, page_url: str) -> None:
    decision = router.decide(query, page_url)
    assert (decision.intent, decision.rule) == (Intent.SITE_SEARCH, "no_page_url")


@pytest.mark.parametrize(
    ("rule_name", "example"),
    [(rule.name, example) for rule in CURRENT_PAGE_RULES for example in rule.examples],
)
def test_every_documented_example_routes_by_its_own_rule(rule_name: str, example: str) -> None:
    assert router.decide(example, PAGE).rule == rule_name


def test_typographic_apostrophe_counts() -> None:
    assert router.route("what\u2019s covered here?", PAGE) is Intent.CURRENT_PAGE


def test_explain_names_the_rule_and_the_matched_text() -> None:
    assert router.explain("Summarize THIS page please", PAGE) == (
        "current_page: rule this_page_reference matched 'THIS page'"
    )
    assert "no_page_url" in router.explain("summarize this page", "")
    assert "general_question" in router.explain("how do I configure ports", PAGE)


def test_rules_are_printable_as_a_table() -> None:
    table = describe_rules()
    assert table.splitlines()[0] == "| rule | when | examples |"
    for rule in CURRENT_PAGE_RULES:
        assert f"`{rule.name}`" in table
    assert len(table.splitlines()) == 2 + len(CURRENT_PAGE_RULES)


def test_custom_rule_set_is_used() -> None:
    bare_summary = next(r for r in CURRENT_PAGE_RULES if r.name == "bare_summary_request")
    only_summary = IntentRouter(rules=(bare_summary,))
    assert only_summary.route("summary", PAGE) is Intent.CURRENT_PAGE
    assert only_summary.route("summarize this page", PAGE) is Intent.SITE_SEARCH
