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

import re
from datetime import datetime

from services.core.errors import InvalidArgument
from services.core.web_url import WEB_URL_RULE, web_url_problem

# RFC 3339 §5.6 date-time: full-date "T" partial-time time-offset ("T" and
# "Z" in either case, §5.6 NOTE), fractions bounded (nanoseconds); or the
# full-date alone.
_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[Tt](\d{2}:\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2}))?",
    re.ASCII,  # `\d` is 0-9 only
)
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
    match = _DATE_TIME.fullmatch(value)
    if match is None or not _is_real_instant(*match.group(1, 2, 3, 5)):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidArgument(f"{field}: {shown!r} is not {_TIMESTAMP_RULE}")


def _is_real_instant(
    date: str, hour_minute: str | None, second: str | None, offset: str | None
) -> bool:
    """The fields make a date (and time) that exist: no 2024-02-30, no 25:00,
    no offset beyond ±23:59. A leap second (:60) is allowed, as in RFC 3339."""
    text = date
    if hour_minute is not None and second is not None and offset is not None:
        offset = "+00:00" if offset in ("Z", "z") else offset
        text += f"T{hour_minute}:{'59' if second == '60' else second}{offset}"
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
