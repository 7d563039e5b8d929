"""Script helpers (services.core.analysis.scripts)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis.scripts import nfkc

pytestmark = pytest.mark.unit


@given(st.text())
def test_nfkc_is_unicode_nfkc(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_nfkc_folds_full_width_and_keeps_what_is_already_normal() -> None:
    assert nfkc("错误码４２９：ＫＥＹ＿ＩＮＶＡＬＩＤ") == "错误码429:KEY_INVALID"
    already = "签名密钥每九十天轮换一次"
    assert nfkc(already) is already
