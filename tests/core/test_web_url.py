"""The one rule for stored link targets (services.core.web_url): what a
browser follows without running anything."""

from __future__ import annotations

import pytest

from services.core.web_url import url_identity_problem, web_url_problem

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url",
    [
        "",
        "https://docs.example/a/b?c=1#d",
        "http://localhost:8080/x",
        "HTTPS://DOCS.EXAMPLE",
        "https://[2001:db8::1]/x",
        "https://docs.example/a@b?c=d@e#f@g",  # "@" after the host is no credential
        "https://\u4f8b\u5b50.\u6d4b\u8bd5/",  # a host wholly in one script
        "https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444/",
        "https://b\u00fccher.example/",  # Latin with a diacritic is still Latin
        "https://xn--bcher-kva.example/",
        "https://\u5927\u962aabc.example/",  # Latin with CJK: not a homoglyph pair
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


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "https://user:pass@evil.example@good.example/",
            "contains credentials (user:password@ before the host)",
        ),
        ("https://user@docs.example/", "contains credentials (user:password@ before the host)"),
        ("http://:@docs.example/", "contains credentials (user:password@ before the host)"),
        ("//user@docs.example/", "contains credentials (user:password@ before the host)"),
        (
            "https://p\u0430ypal.example/",  # Cyrillic а
            "host label 'p\u0430ypal' mixes Cyrillic and Latin letters",
        ),
        (
            "https://docs.ex\u03bfmple.com:8443/x",  # Greek ο
            "host label 'ex\u03bfmple' mixes Greek and Latin letters",
        ),
        (
            "https://xn--pple-43d.com/",  # punycode of Cyrillic а + "pple"
            "host label 'xn--pple-43d' mixes Cyrillic and Latin letters",
        ),
    ],
)
def test_credentials_and_mixed_script_hosts_are_refused(url: str, problem: str) -> None:
    assert web_url_problem(url) == problem
    assert url_identity_problem(url) == problem


@pytest.mark.parametrize(
    "url", ["", "file:///home/me/page.html", "about:blank", "https://docs.example/a@b"]
)
def test_identity_rule_allows_any_scheme(url: str) -> None:
    """A Retriever's page_url is the page a user is on: any scheme, but no
    credentials and no mixed-script host either."""
    assert url_identity_problem(url) is None
