"""A request body as a JSON object, or a 400 saying why not (never a 500).

- UTF-8 only (RFC 8259 §8.1): `json.loads` given bytes would also guess
  UTF-16 and UTF-32.
- Nesting is measured before parsing, by one linear pass over the brackets
  outside strings: the parser and the validator recurse once per level, and a
  few thousand `[` (far below the body size limit) end in RecursionError.
- `NaN` and `Infinity` are not JSON; Python's parser accepts them unless told.
- A lone surrogate escape (`"\\ud800"`) decodes to a str that cannot be encoded
  again, so it would fail later, in the proto or a log line.
- A name twice in one object (RFC 8259 §4: names SHOULD be unique) is refused:
  parsers differ on which value wins (this one takes the last, others the
  first or fail), so a filter in front of the gateway could check one value
  while the search used the other.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.errors import ApiError, ErrorCode

# A JSON string token, escapes included; linear (no nested repetition).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # paired escapes decode to one astral character


class _NotJson(ValueError):
    """A value Python's parser accepts but JSON does not."""


def parse_json_object(raw: bytes, max_depth: int) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(ErrorCode.INVALID_JSON, "the body is not UTF-8 text") from None
    if text.startswith("\ufeff"):  # RFC 8259 §8.1: senders MUST NOT add one
        raise ApiError(
            ErrorCode.INVALID_JSON,
            "the body starts with a byte order mark (U+FEFF): send JSON as UTF-8 without one",
        )
    if nests_deeper_than(text, max_depth):
        raise ApiError(
            ErrorCode.JSON_TOO_DEEP,
            f"the body nests arrays and objects deeper than {max_depth} levels",
        )
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_names)
    except _NotJson as exc:
        raise ApiError(ErrorCode.INVALID_JSON, str(exc)) from None
    except json.JSONDecodeError as exc:  # its message names no input, only where
        # Some of json's messages end in "at" themselves ("Invalid control character at").
        where = f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"
        raise ApiError(ErrorCode.INVALID_JSON, f"the body is not valid JSON: {where}") from None
    except ValueError:  # an integer past Python's digit limit: valid JSON, no valid value
        raise ApiError(
            ErrorCode.INVALID_JSON, "the body holds a number too long to read (over 4300 digits)"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_JSON, "the body must be a JSON object")
    # Only a \u escape can produce a surrogate: strict UTF-8 decoding refuses them.
    if "\\u" in text and _has_lone_surrogate(data):
        raise ApiError(ErrorCode.INVALID_JSON, "the body has an unpaired surrogate escape")
    return data


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects in `text` nest deeper than `limit`, counting
    brackets outside strings. Where this count and a JSON parser disagree
    (a broken escape, an unterminated string), the parser stops with an error
    at that point, so it never descends further than counted here."""
    outside = _STRING.sub("", text)
    if outside.count("[") + outside.count("{") <= limit:
        return False  # every ordinary request: no loop in Python
    depth = 0
    for bracket in _BRACKET.finditer(outside):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:
            raise _NotJson(f"the body names {name[:40]!r} twice in one object")
        obj[name] = value
    return obj


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value")


def _has_lone_surrogate(value: object) -> bool:
    # Recursion is bounded: the depth was checked before parsing.
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False
