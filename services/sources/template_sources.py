"""Telling a template's source from a page, among a folder's `.html` files.

Documentation packages ship example applications, and their templates are
named `.html` (python-werkzeug-doc and python-jinja2-doc: 43 of 103 files):
indexed, they were documents titled `{% block title %}{% endblock %} | shortly`
holding `- {% for item in seq %}`. A page a generator wrote has its template
markup rendered away; what is left of it is in code samples (a template
language's own manual: Jinja's "Template Designer Documentation" holds 114
tags outside code, 1.7 per 1,000 characters of its text). A template's
source holds its markup in its text: 7 to 59 tags per 1,000 characters in
those packages. So an HTML file is a template's source when its title holds
template markup, or its text outside code holds at least `MIN_TAGS` tags and
at least `MIN_TAGS_PER_1000_CHARS`. Markdown and plain text are not judged:
their sources legitimately hold markup (Hugo's shortcodes `{{< ref >}}`).
"""

from __future__ import annotations

import re

MIN_TAGS = 3
MIN_TAGS_PER_1000_CHARS = 5.0
# A file is judged by its opening: a template is short, and the patterns below
# then cost a bounded time on any page (a file may hold 64 MiB).
MAX_JUDGED_CHARS = 100_000
# Jinja, Django, Liquid, Nunjucks, Handlebars, Mustache ({% %}, {{ }}, {# #}),
# Mako/Genshi (${...}, <% %>), ERB/EJS/JSP (<% %>). A tag is one line of at
# most 200 characters without braces inside: an open tag's search stops at
# the next brace, so a line of 40,000 '{{' no longer takes 18 s (each search
# ran to the line's end).
_TAG = re.compile(
    r"\{%[^%{}\n]{0,200}%\}|\{\{[^{}\n]{0,200}\}\}|\{#[^#{}\n]{0,200}#\}"
    r"|<%[^%<>\n]{0,200}%>|\$\{[^{}\n]{0,200}\}"
)
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
# A code span: a whole run of at most 16 backticks, up to 1,000 characters and
# the same run (whole runs on both sides: a run of 20,000 backticks made the
# search try every shorter run at every position, 23 s for 20 KB).
_INLINE_CODE = re.compile(r"(?<!`)(`{1,16})(?!`)[\s\S]{0,1000}?(?<!`)\1(?!`)")


def template_markup(title: str, markdown: str) -> int | None:
    """How many template tags a converted HTML file (its title and the
    first `MAX_JUDGED_CHARS` of its Markdown) holds outside code when it
    reads as a template's source, else None."""
    prose = _INLINE_CODE.sub(" ", _FENCED.sub(" ", markdown[:MAX_JUDGED_CHARS]))
    tags = len(_TAG.findall(prose))
    if _TAG.search(title):
        return tags + len(_TAG.findall(title))
    dense = tags * 1000 >= MIN_TAGS_PER_1000_CHARS * max(len(prose), 1)
    return tags if tags >= MIN_TAGS and dense else None


def template_note(tags: int) -> str:
    """The report's reason for a template's source left out."""
    return (
        f"a template's source, not a page ({tags} template tags outside code, "
        "such as {% block %} or {{ name }}), skipped"
    )
