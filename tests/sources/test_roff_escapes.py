"""roff escapes read as the characters a manual page shows (unit)."""

from __future__ import annotations

import pytest

from services.sources.roff_escapes import without_escapes

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("\\fBls\\fP [\\fI\\,OPTION\\/\\fP]...", "ls [OPTION]..."),  # help2man's fonts
        ("\\-\\-block\\-size=\\fI\\,SIZE\\/\\fP", "--block-size=SIZE"),
        ("a \\(em b \\[en] c", "a \u2014 b \u2013 c"),
        ("\\*(lqquoted\\*(rq \\*R", "\u201cquoted\u201d \u00ae"),
        ("\\[u00E9]t\\[char233]", "\u00e9t\u00e9"),
        ("\\f(CWcode\\fR \\f[CB]bold\\f[]", "code bold"),
        ("\\s-1SMALL\\s0 \\s[+2]big\\s[0]", "SMALL big"),
        ("\\e \\\\ \\& \\. \\~x", "\\ \\  .  x"),
        ("\\N'65'\\w'abc'\\h'3n'\\n(.g\\n[x]\\*[unknown]", "A"),
        ("joined\\c", "joined"),
        ("\\[u0000]\\[uD800]\\[uZZ]\\[u110000]", ""),  # no character there: nothing
        ("\\N'99999999'\\N'0'\\N'27'\\N'55296'\\N'233'", "\u00e9"),
    ],
)
def test_each_escape_shows_its_character_or_nothing(written: str, shown: str) -> None:
    assert without_escapes(written) == shown


def test_text_without_escapes_is_unchanged() -> None:
    text = "列出目录内容 (plain) text: 3 < 4 & [x]"
    assert without_escapes(text) == text


def test_a_number_escape_of_other_digits_shows_nothing() -> None:
    assert without_escapes("a\\N'\u00b9'b\\N'\u0663'c") == "abc"  # superscript, Arabic-Indic
