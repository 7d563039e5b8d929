"""The digest a pinned file is checked against."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """The file's sha256, hex, read in blocks (model files run to gigabytes)."""
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()
