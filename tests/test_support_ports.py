"""The tests' free-port helper never hands the same port out twice."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest

from bench.common import processes
from tests.support import ports

pytestmark = pytest.mark.unit


class RepeatingSocket:
    """Fake, to inject the fault: the system handing back the port it just
    released (what made two listeners of one test collide in CI)."""

    given = iter([41001, 41001, 41001, 41002])

    def __enter__(self) -> RepeatingSocket:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = next(self.given)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_the_system_gives_again_is_not_handed_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    monkeypatch.setattr(processes, "socket", SimpleNamespace(socket=RepeatingSocket))
    assert [ports.free_port(), ports.free_port()] == [41001, 41002]


def test_a_handed_out_port_is_free_to_listen_on() -> None:
    port = ports.free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
