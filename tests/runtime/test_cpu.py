"""The OpenMP wait policy: passive unless the operator chose one."""

from __future__ import annotations

import os

import pytest

from services.runtime.cpu import prefer_passive_waits

pytestmark = pytest.mark.unit


def test_sets_passive_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    prefer_passive_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_keeps_the_operators_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    prefer_passive_waits()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
