"""The one rule for stored link targets (services.core.web_url): what a
browser follows without running anything."""

from __future__ import annotations

import pytest

from services.core.web_url import web_url_problem

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url",
    [
        "",
        "https://docs.example/a/b?c=1#d",
        "http://localhost:8080/x",
        "HTTPS://DOCS.EXAMPLE",
        "https://[2001:db8::1]/x",
        "https://user@docs.example/",
        "guides/setup.md",
        "/docs/page",
        "../up/one",
        "./a:b",  # a colon after the first segment is a path
        "?page=2",
        "#section",
        "caf%C3%A9.md",
        "caf\u00e9.md",
    ],
)
def test_web_urls_and_relative_paths_are_allowed(url: str) -> None:
    assert web_url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("javascript:alert(3)", "scheme 'javascript' is not allowed"),
        ("JaVaScRiPt:alert(3)", "scheme 'javascript' is not allowed"),
        ("data:text/html;base64,PHNjcmlwdD4=", "scheme 'data' is not allowed"),
        ("file:index.md", "scheme 'file' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("vbscript:msgbox(1)", "scheme 'vbscript' is not allowed"),
        ("mailto:someone@example.com", "scheme 'mailto' is not allowed"),
        ("a:b", "scheme 'a' is not allowed"),  # RFC 3986 reads a scheme here
        ("java\tscript:alert(1)", "contains control characters"),  # browsers drop the tab
        ("https://x.test/\n", "contains control characters"),
        (" javascript:alert(1)", "starts or ends with whitespace"),  # browsers strip it
        ("https://x.test/\u00a0", "starts or ends with whitespace"),
        ("/\\evil.example", "contains a backslash"),  # browsers read `/\` as `//`
        ("//evil.example/x", "a scheme-relative URL (//host) is not allowed"),
        ("https:/x", "an absolute https URL needs a host"),
        ("http://", "an absolute http URL needs a host"),
        ("http://[::1/x", "not a valid URL (Invalid IPv6 URL)"),
    ],
)
def test_other_schemes_and_misleading_shapes_are_refused(url: str, problem: str) -> None:
    assert web_url_problem(url) == problem
