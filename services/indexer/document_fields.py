"""Rules for a document's `url` and `updated_at` (called by
`validation.validate_document`; a violation rejects that document alone).

`url` is stored and returned as it is: in JSON, in evidence text, and as the
target of a link in the gateway's web page. It follows the services' one rule
for such URLs (`services.core.web_url`): empty, an absolute `http`/`https`
URL with a host, or a relative path; `javascript:`, `data:`, `file:`,
`vbscript:` and every other scheme are refused, and so are the shapes a
browser reads otherwise than they look.

`updated_at` is an RFC 3339 date-time (`2024-05-01T12:00:00Z`,
`2024-05-01T14:00:00.5+02:00`) or full-date (`2024-05-01`, what front matter
and exports often hold), or empty when unknown.
"""

from __future__ import annotations

from services.core.errors import InvalidArgument
from services.core.field_rules import parse_rfc3339
from services.core.web_url import WEB_URL_RULE, web_url_problem

_TIMESTAMP_RULE = (
    "an RFC 3339 date-time such as 2024-05-01T12:00:00Z (or a full-date such as 2024-05-01)"
)


def check_web_url(field: str, url: str) -> None:
    """`url` is empty, an absolute http(s) URL with a host, or a relative path."""
    problem = web_url_problem(url)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}; {field} must be {WEB_URL_RULE}")


def check_timestamp(field: str, value: str) -> None:
    """`value` is empty, or an RFC 3339 date-time or full-date that exists."""
    if not value:
        return
    if parse_rfc3339(value, date_only=True) is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidArgument(f"{field}: {shown!r} is not {_TIMESTAMP_RULE}")
