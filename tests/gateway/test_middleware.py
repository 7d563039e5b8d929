"""The head-size measure the 431 bound reads: the bytes of the head as sent."""

from __future__ import annotations

import pytest

from gateway.middleware import head_bytes

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("target", "query"),
    [(b"/v1/search", b""), (b"/v1/search", b"a=1&b=%C3%A9"), (b"/", b"")],
)
def test_head_bytes_counts_the_head_as_it_was_sent(target: bytes, query: bytes) -> None:
    headers = [(b"host", b"gateway"), (b"x-note", b"a" * 300), (b"accept", b"*/*")]
    full_target = target + (b"?" + query if query else b"")
    sent = b"POST " + full_target + b" HTTP/1.1\r\n"
    sent += b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    scope = {"method": "POST", "raw_path": target, "query_string": query, "headers": headers}
    assert head_bytes(scope) == len(sent)
