"""What an HTML page says about its language: `<html lang>` and its alternates.

`<html lang="zh-CN">` is the page's own declaration of its language, and
`<link rel="alternate" hreflang="en" href="...">` in the head names the same
page in other languages (the form search engines read). Both sit before the
body, so only the text before `<body` is parsed, with the standard library's
tolerant parser: a page's markup can be broken, its load must not fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

_BODY_START = re.compile(r"<body[\s>/]", re.I)


@dataclass(frozen=True)
class Alternate:
    hreflang: str
    href: str


@dataclass(frozen=True)
class HtmlHead:
    lang: str = ""  # as written; "" when the page declares none
    alternates: tuple[Alternate, ...] = ()


def read_html_head(html: str) -> HtmlHead:
    """The `lang` of `<html>` (or its `xml:lang`) and the hreflang alternates."""
    body = _BODY_START.search(html)
    parser = _HeadParser()
    try:
        parser.feed(html[: body.start()] if body else html)
        parser.close()
    except Exception:  # markup must never fail a load
        pass
    return HtmlHead(parser.lang, tuple(parser.alternates))


class _HeadParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lang = ""
        self.alternates: list[Alternate] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name.lower(): (value or "").strip() for name, value in attrs}
        if tag == "html" and not self.lang:
            self.lang = values.get("lang") or values.get("xml:lang", "")
        elif tag == "link" and "alternate" in values.get("rel", "").lower().split():
            hreflang, href = values.get("hreflang", ""), values.get("href", "")
            if hreflang and href:
                self.alternates.append(Alternate(hreflang, href))
