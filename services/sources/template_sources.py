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
# Jinja, Django, Liquid, Nunjucks, Handlebars, Mustache ({% %}, {{ }}, {# #}),
# Mako/Genshi (${...}, <% %>), ERB/EJS/JSP (<% %>).
_TAG = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|<%.*?%>|\$\{[^}\n]*\}")
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"(`+).*?\1", re.DOTALL)


def template_markup(title: str, markdown: str) -> int | None:
    """How many template tags a converted HTML file (its title and Markdown)
    holds outside code when it reads as a template's source, else None."""
    prose = _INLINE_CODE.sub(" ", _FENCED.sub(" ", markdown))
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
