"""Ports for a stack's listeners, chosen at once: never the same twice, never
one the caller already gave another listener (two listeners on one port made
a CI run fail with "Address already in use")."""

from __future__ import annotations

import socket

import pytest

from bench.common.processes import free_ports

pytestmark = pytest.mark.unit


def test_ports_chosen_together_are_distinct_and_free() -> None:
    for _ in range(20):
        ports = free_ports(4)
        assert len(set(ports)) == 4
        for port in ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))  # raises if it were in use


def test_a_taken_port_is_not_handed_out_again() -> None:
    first = free_ports(2)
    for _ in range(20):
        assert not set(free_ports(2, taken=first)) & set(first)
