"""`ingest` of a documentation site written in MDX (Docusaurus), against a
real Indexer and Retriever: every page is read, each answer is found first,
and what a hit shows is the text a reader sees, without imports or JSX tags."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from tests.operator.test_cli import cli, counts
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

SCOPE = rpb.ScopeFilter(scope_id="mdx-site")
PAGES = {
    "docs/install.mdx": """---
title: Installation
---
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';

# Installation

<Tabs groupId="os">
  <TabItem value="mac" label="macOS">
    Install with Homebrew: `brew install skerry`.
  </TabItem>
  <TabItem value="linux" label="Linux">
    On Debian, add the apt repository, then run `apt install skerry`; the service
    starts at boot through its systemd unit.
  </TabItem>
</Tabs>
""",
    "docs/rate-limits.mdx": """import Admonition from '@theme/Admonition';

# Rate limits

<Admonition type="warning" title="Quota">
  Each API key may send 600 requests a minute; past that the API answers 429 and the
  Retry-After header says how many seconds to wait.
</Admonition>
""",
    "docs/intro.md": "# Introduction\n\nSkerry indexes documentation for search.\n",
}


def test_an_mdx_site_is_indexed_as_the_text_a_reader_sees(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    for relpath, text in PAGES.items():
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_text(text, encoding="utf-8")
    done = cli(stack, "ingest", str(tmp_path), "--scope", "mdx-site")
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout)["added"] == 3
    for question, page in (
        ("how do I install it on Debian and does it start at boot", "docs/install.mdx"),
        ("how long should I wait after too many requests", "docs/rate-limits.mdx"),
    ):
        hits = stack.retrieve(question, top_k=3, disable_rerank=True, filter=SCOPE).hits
        assert hits[0].doc_id == page
        assert "<TabItem" not in hits[0].text and "<Admonition" not in hits[0].text
        assert "import " not in hits[0].text
    install = stack.retrieve("apt install skerry", top_k=1, disable_rerank=True, filter=SCOPE)
    install = install.hits[0]
    assert install.title == "Installation" and "systemd unit" in install.text
