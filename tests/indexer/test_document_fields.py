"""A document's `url` (services.core.web_url's rule, as an Indexer
rejection) and `updated_at` (RFC 3339), checked one value at a time."""

from __future__ import annotations

import pytest

from services.core.errors import InvalidArgument
from services.indexer.document_fields import check_timestamp, check_web_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("url", ["", "https://docs.example/a?b#c", "guides/setup.md", "/x"])
def test_web_urls_and_relative_paths_are_accepted(url: str) -> None:
    check_web_url("url", url)


def test_a_refused_url_names_the_field_the_problem_and_the_rule() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_web_url("url", "javascript:alert(3)")
    assert str(caught.value) == (
        "url: scheme 'javascript' is not allowed; "
        "url must be an absolute http(s) URL or a relative path"
    )


@pytest.mark.parametrize(
    "value",
    [
        "",
        "2024-05-01T12:00:00Z",
        "2024-05-01t12:00:00z",
        "2024-05-01T14:00:00.5+02:00",
        "2024-05-01T12:00:00.123456789-07:30",
        "2016-12-31T23:59:60Z",  # a leap second
        "2024-02-29T00:00:00+00:00",
        "2024-05-01",
    ],
)
def test_rfc3339_timestamps_are_accepted(value: str) -> None:
    check_timestamp("updated_at", value)


@pytest.mark.parametrize(
    "value",
    [
        "not-a-date",
        "2024-05-01T12:00:00",  # no offset
        "2024-05-01 12:00:00Z",
        "2024-05-01T12:00Z",
        "2023-02-29T00:00:00Z",
        "2024-13-01",
        "2024-05-01T24:00:00Z",
        "2024-05-01T12:00:00+24:00",
        "2024-05-01T12:00:00.1234567890Z",
        "20240501T120000Z",
        "2024-05-01T12:00:00Z\n",
        "١٠٢٤-05-01",  # Arabic-Indic digits are not RFC 3339 digits
    ],
)
def test_anything_else_is_refused_naming_the_rule(value: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_timestamp("updated_at", value)
    assert f"updated_at: {value!r} is not an RFC 3339 date-time" in str(caught.value)


def test_a_long_value_is_not_echoed_back() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_timestamp("updated_at", "9" * 100_000)
    assert len(str(caught.value)) < 200
