"""mdoc(7)'s semantic macros as the words a rendered BSD page shows (unit)."""

from __future__ import annotations

import shlex

import pytest

from services.sources.manual_macros import mdoc_words

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("Op Fl c Ar cipher", "[-c cipher]"),
        ("Op Fl a Op Fl b", "[-a [-b]]"),
        ("Xr ssh 1 ,", "ssh(1),"),
        ("Nm", "scp"),
        ("Nm sftp", "sftp"),
        ("Nd OpenSSH secure file copy", "\u2014 OpenSSH secure file copy"),
        ("Fl", "-"),
        ("Fl o Ns Ar option", "-ooption"),
        ("Pq see Dq Ciphers .", "(see \u201cCiphers\u201d)."),
        ("Oo Fl v Oc", "[-v]"),
        ("Ex -std", "The scp utility exits 0 on success, and >0 if an error occurs."),
        ("Cm yes , no", "yes, no"),
        ("Ox", "OpenBSD"),
    ],
)
def test_a_line_shows_what_mandoc_renders(line: str, shown: str) -> None:
    assert mdoc_words(shlex.split(line), "scp") == shown
