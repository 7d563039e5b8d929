"""Templates of example applications named `.html` are reported and left
out; documentation about a template language, which shows its markup in code
samples, is a page (python-jinja2-doc and python-werkzeug-doc, probe)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.models import Document
from services.sources.loaders import LoadError, load_directory
from services.sources.template_sources import MAX_JUDGED_CHARS, template_markup

pytestmark = pytest.mark.unit

TEMPLATE = """{% extends "layout.html" %}
{% block title %}Create New Short URL{% endblock %}
{% block body %}
<h2>Submit URL</h2>
<form action="" method="post">
{% if error %}<p class="error"><strong>Error:</strong> {{ error }}{% endif %}
<p>URL: <input type="text" name="url" value="{{ url }}" class="urlinput"></p>
</form>
{% endblock %}
"""

MANUAL = """<html><head><title>Template Designer Documentation</title></head><body>
<h1>Template Designer Documentation</h1>
<p>A template contains variables, which get replaced with values when the template is
rendered, and tags, which control the logic of the template. The default delimiters are
<code>{% ... %}</code> for statements and <code>{{ ... }}</code> for expressions; a
statement such as {% raw %} is written in the text of this paragraph too.</p>
<pre>{% for user in users %}
  <li>{{ user.username|e }}</li>
{% endfor %}</pre>
<p>Filters are separated from the variable by a pipe symbol and may take arguments.</p>
</body></html>"""


def test_a_template_is_told_from_a_manual_about_templates() -> None:
    assert template_markup("", "{% extends %}\n\n## Submit URL\n\n{{ error }} {{ url }}") == 3
    assert template_markup("{% block title %}{% endblock %} | shortly", "Hello") == 2
    # One tag in a manual's prose (the rest in code) is not a template's.
    manual = "A statement such as {% raw %} keeps text as it is. " * 3 + "x" * 2000
    assert template_markup("Template Designer Documentation", manual) is None
    assert template_markup("Jinja", "```\n{% for %}{% endfor %}{{ x }}\n```\n`{{ y }}`") is None


def test_the_folder_loader_reports_a_template_and_loads_the_manual(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "new_url.html").write_text(TEMPLATE)
    (tmp_path / "templates.html").write_text(MANUAL)
    # Markdown is not judged: a Hugo page's shortcodes are its own markup.
    (tmp_path / "refs.md").write_text('# Refs\n\nSee {{< ref "a" >}}, {{< ref "b" >}}, {{< x >}}.')
    items = list(load_directory(tmp_path, scope_id="s"))
    assert sorted(i.doc_id for i in items if isinstance(i, Document)) == [
        "refs.md",
        "templates.html",
    ]
    (skipped,) = [i for i in items if isinstance(i, LoadError)]
    assert skipped.source == "templates/new_url.html" and skipped.skipped
    assert skipped.reason.startswith("a template's source, not a page (5 template tags outside")


def test_awkward_markup_is_judged_by_bounded_patterns() -> None:
    """Runs of open tags or backticks (each once made every search run to the
    line's or the text's end) count no tag; a tag past the judged opening is
    not read; a code span of the longest backtick run judged still hides its tags."""
    assert template_markup("", "{{" * 40_000) is None
    assert template_markup("", "{% a " * 40_000) is None
    assert template_markup("", "${" * 50_000 + "`" * 20_000) is None
    tags = "{% if x %}{{ y }}{# z #}"
    assert template_markup("", tags) == 3
    unit = "{{ a }} "  # the judged opening holds exactly this many of them
    assert template_markup("", unit * (MAX_JUDGED_CHARS // len(unit) + 100)) == 12_500
    # Two characters later, the last one is cut by the end of the opening.
    assert template_markup("", "  " + unit * (MAX_JUDGED_CHARS // len(unit))) == 12_499
    fence = "`" * 16
    assert template_markup("", f"{fence} {tags} {fence}") is None
    # A run longer than a code span's fence is no span: its tags are counted.
    assert template_markup("", f"{fence}` {tags} {fence}`") == 3
