"""MDX pages read as the Markdown a reader sees (unit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.sources.loaders import load_directory
from services.sources.mdx_pages import MAX_TAG_CHARS, mdx_as_markdown

pytestmark = pytest.mark.unit

# A Docusaurus page as written: front matter, imports, tabs of components
# with attributes over lines and a template literal, a comment, a callout.
PAGE = """---
title: Install the CLI
---
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
import {
  Callout,
} from 'nextra/components'

export const meta = { draft: false };

# Install

{/* TODO: add Windows */}

Install the CLI with your package manager.

<Tabs groupId="os">
  <TabItem value="mac" label="macOS" default>

```bash
brew install tool
import this stays
<Tabs> stays too
```

  </TabItem>
  <TabItem
    value="linux"
    label={`Linux ${"x"}`}>
    Use `apt install tool` or see <Link to="/docs/build">building from source</Link>.
  </TabItem>
</Tabs>

<Callout type="warning">
  Version 2 changed the config file. `<Tabs>` in code stays.
</Callout>

A <Foo.Bar x={1} /> and a fragment <>of text</> end here; 3 < 4 and a<b stay.
"""


def test_components_go_their_text_stays_and_code_is_kept_as_written() -> None:
    text = mdx_as_markdown(PAGE)
    for gone in ("import Tabs", "Callout,", "export const", "TODO", "<TabItem", "</Tabs>",
                 "<Link", "<Callout", "<Foo.Bar", "<>", "groupId"):  # fmt: skip
        assert gone not in text, gone
    for kept in ("title: Install the CLI", "# Install", "Install the CLI with your package",
                 "brew install tool\nimport this stays\n<Tabs> stays too\n```",
                 "Use `apt install tool` or see building from source.",
                 "Version 2 changed the config file. `<Tabs>` in code stays.",
                 "A  and a fragment of text end here; 3 < 4 and a<b stay."):  # fmt: skip
        assert kept in text, kept


def test_an_unclosed_tag_or_comment_is_text() -> None:
    assert mdx_as_markdown("see <Beta and {/* open\n") == "see <Beta and {/* open\n"
    assert mdx_as_markdown("a {/* one */} b\n") == "a  b\n"
    assert mdx_as_markdown("```js\nimport x from 'y'\n") == "```js\nimport x from 'y'\n"


@pytest.mark.timeout(120)  # the hang guard: a rescan from every tag start took minutes
@pytest.mark.parametrize(
    "hostile",
    ['<A "' * 100_000, "{/*" * 100_000, "<A {" * 100_000, "` x `` " * 50_000, "`" * 200_000],
)
def test_hostile_text_is_read_in_linear_time_and_kept(hostile: str) -> None:
    assert mdx_as_markdown(hostile) == hostile


def test_a_folder_of_mdx_pages_is_loaded_as_markdown(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "install.mdx").write_text(PAGE, encoding="utf-8")
    (tmp_path / "docs" / "intro.md").write_text("# Intro\n\nHello.\n", encoding="utf-8")
    docs = {d.doc_id: d for d in load_directory(tmp_path, scope_id="s") if isinstance(d, Document)}
    page = docs["docs/install.mdx"]
    assert page.content_type is ContentType.MARKDOWN
    assert page.title == "Install the CLI" and "<TabItem" not in page.text
    assert set(docs) == {"docs/install.mdx", "docs/intro.md"}


@given(extra=st.integers(min_value=-3, max_value=3))
def test_a_tag_closes_only_within_its_bound(extra: int) -> None:
    """Around `MAX_TAG_CHARS`: a tag whose `>` comes within the bound goes,
    one past it stays text (its closing tag, short, still goes)."""
    # From the end of the name to the `>`: ` title="` (8), the value, `"` (1).
    value = "x" * (MAX_TAG_CHARS - 10 + extra)
    page = f'<Tabs title="{value}">body</Tabs>'
    read = mdx_as_markdown(page)
    assert read == ("body" if 9 + len(value) < MAX_TAG_CHARS else page[: -len("</Tabs>")])


_PROSE = st.text(alphabet=st.sampled_from(list("ab <>/{}*\"'`=.Tx\n")), max_size=300)


@given(before=_PROSE, code=_PROSE, after=_PROSE)
def test_code_is_kept_and_nothing_is_added_whatever_the_prose(
    before: str, code: str, after: str
) -> None:
    """Any prose around a fenced block, up to the page's end: the block comes
    back as written, and the page is never longer than it was."""
    block = "~~~~\n" + code.replace("~", "") + "\n~~~~\n"
    # No fence opens before the block: the prose holds no `~` or backtick run.
    page = before.replace("~", "").replace("`", "") + "\n\n" + block + after.replace("~", "")
    read = mdx_as_markdown(page)
    assert block in read and len(read) <= len(page)
