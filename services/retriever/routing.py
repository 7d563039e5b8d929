"""Intent routing: explicit rules deciding whether a query is about the page the
user is on (`current_page`) or a search across the site (`site_search`).

Why rules and not a model: the decision changes the *scope* of retrieval
(current-page mode never falls back to site-wide results), so it must be
inspectable and testable. The rules are data (`CURRENT_PAGE_RULES`), each with
a name, a description and examples the tests route, so docs can print them.

Precedence:
1. no page URL (empty or blank)       -> site_search, rule `no_page_url`
2. the first current-page rule that
   matches, in `CURRENT_PAGE_RULES`
   order                              -> current_page, that rule's name
3. otherwise (a general question
   asked while on a page)             -> site_search, rule `general_question`

Matching is case-insensitive and word-boundary aware ("thistle page" is not
"this page", "where" is not "here"); typographic apostrophes count as `'`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.retriever.types import Intent

_PAGE_NOUN = (
    r"(?:web\s*page|page|article|blog\s+post|post|doc|docs|document|documentation"
    r"|guide|tutorial|write-?up|section)"
)
_SUMMARY_VERB = r"(?:summari[sz]e|summari[sz]ing|recap|tl;?\s?dr|tldr)"
# Words that may surround a bare summary request without making it a question
# about something else ("please give me a short summary").
_FILLER = (
    r"(?:please|pls|can|could|would|will|you|give|me|us|a|an|the|short|quick|brief"
    r"|one-line|i|want|need|like|get|write|make|do|provide|now|just)"
)
_SUMMARY_NOUN = (
    r"(?:summary|summari[sz]e|summari[sz]ation|recap|tl;?\s?dr|tldr|gist"
    r"|key\s+points|main\s+points|key\s+takeaways|takeaways)"
)
_APOSTROPHE = "['\u2019]"


@dataclass(frozen=True)
class RoutingRule:
    """One current-page rule: a case-insensitive regex searched in the query."""

    name: str
    description: str
    pattern: str
    examples: tuple[str, ...]

    def search(self, query: str) -> re.Match[str] | None:
        return re.search(self.pattern, query, flags=re.IGNORECASE)


@dataclass(frozen=True)
class RouteDecision:
    intent: Intent
    rule: str
    matched: str = ""


CURRENT_PAGE_RULES: tuple[RoutingRule, ...] = (
    RoutingRule(
        name="this_page_reference",
        description='"this"/"current" followed by a page noun (page, article, post, doc, ...)',
        pattern=rf"\b(?:this|the\s+current|current)\s+{_PAGE_NOUN}\b",
        examples=(
            "what does this article say about ports?",
            "Explain this page",
            "is there a code sample on this page",
            "key points of the current document",
        ),
    ),
    RoutingRule(
        name="summarize_this",
        description='a summary verb aimed at "this"/"it"/"here"/"the page" ("summarize this")',
        pattern=(
            rf"\b{_SUMMARY_VERB}\s+(?:this|it|here|the\s+{_PAGE_NOUN}\b)"
            rf"|\bsummary\s+(?:of|for)\s+(?:this|it|here)\b"
        ),
        examples=(
            "summarize this",
            "Summarise it in three bullet points",
            "tl;dr this please",
            "give me a summary of this",
            "summarize the article",
        ),
    ),
    RoutingRule(
        name="bare_summary_request",
        description="the whole query is a summary request with only filler words around it",
        pattern=rf"^\W*(?:\b{_FILLER}\b\W*)*\b{_SUMMARY_NOUN}\b(?:\W*\b{_FILLER}\b)*\W*$",
        examples=("summary", "TL;DR", "tldr?", "Can you give me a short summary, please?"),
    ),
    RoutingRule(
        name="what_is_this_about",
        description='asks what "this"/"it" is about, says or means ("what is this about?")',
        pattern=(
            rf"\bwhat(?:{_APOSTROPHE}s|\s+is|\s+does)\s+(?:this|it)"
            r"\s+(?:about\W*$|say\b|says\b|cover\b|mean\W*$)"
        ),
        examples=("what is this about?", "What\u2019s it about", "what does this say about TLS"),
    ),
    RoutingRule(
        name="explain_this",
        description='"explain this/it" as the whole request (optionally "to me", "simply")',
        pattern=r"\bexplain\s+(?:this|it)(?:\s+(?:to|for)\s+me)?(?:\s+simply)?\W*$",
        examples=("explain this", "Can you explain it to me?"),
    ),
    RoutingRule(
        name="here_reference",
        description='asks about what is written "here" ("what is discussed here")',
        pattern=(
            rf"\bwhat(?:{_APOSTROPHE}s|\s+is|\s+are)\s+(?:\w+\s+)?(?:here|on\s+here)\b"
            r"|\b(?:said|says|say|written|covered|discussed|described|explained|mentioned"
            r"|shown|listed)\s+(?:in\s+)?here\b"
        ),
        examples=("what's covered here?", "what is discussed here", "which ports are listed here"),
    ),
)


class IntentRouter:
    """Decides the intent of a query from explicit rules (see module docstring)."""

    def __init__(self, rules: tuple[RoutingRule, ...] = CURRENT_PAGE_RULES) -> None:
        self.rules = rules

    def decide(self, query: str, page_url: str) -> RouteDecision:
        """The intent together with the rule that produced it."""
        if not page_url.strip():
            return RouteDecision(Intent.SITE_SEARCH, "no_page_url")
        for rule in self.rules:
            match = rule.search(query)
            if match:
                return RouteDecision(Intent.CURRENT_PAGE, rule.name, match.group(0).strip())
        return RouteDecision(Intent.SITE_SEARCH, "general_question")

    def route(self, query: str, page_url: str) -> Intent:
        return self.decide(query, page_url).intent

    def explain(self, query: str, page_url: str) -> str:
        """One line naming the rule that decided, for debug reports and logs."""
        decision = self.decide(query, page_url)
        if decision.rule == "no_page_url":
            return f"{decision.intent.value}: rule no_page_url (no page URL given)"
        if decision.rule == "general_question":
            return (
                f"{decision.intent.value}: rule general_question "
                "(page URL given, but no current-page rule matched)"
            )
        return f"{decision.intent.value}: rule {decision.rule} matched {decision.matched!r}"


def describe_rules(rules: tuple[RoutingRule, ...] = CURRENT_PAGE_RULES) -> str:
    """The rule table as Markdown, for the docs."""
    lines = ["| rule | when | examples |", "|---|---|---|"]
    for rule in rules:
        examples = "; ".join(f"`{example}`" for example in rule.examples)
        lines.append(f"| `{rule.name}` | {rule.description} | {examples} |")
    return "\n".join(lines)
