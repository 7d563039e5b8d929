"""What the document encoder reads of a chunk, and the hash that says to embed it again (unit)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.core.embedded_text import embedding_text, parent_titles
from services.indexer.identity import chunk_hash, content_hash

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Titled:
    heading_path: str
    text: str


@pytest.mark.parametrize(
    ("path", "text", "embedded"),
    [
        ("", "Plain words.", "Plain words."),
        ("Ops > Backups", "Run the restore command.", "Ops > Backups\n\nRun the restore command."),
        ("Guide", "# Guide\n\nIntro.", "# Guide\n\nIntro."),
        (
            "Conditional Rendering > `v-show`",
            "## `v-show`\n\nAnother option.",
            "Conditional Rendering\n\n## `v-show`\n\nAnother option.",
        ),
        ("A > B > C", "  ### C\n\nDeep.", "A > B\n\n  ### C\n\nDeep."),
    ],
)
def test_a_chunk_is_embedded_under_every_title_above_its_text(
    path: str, text: str, embedded: str
) -> None:
    assert embedding_text(Titled(path, text)) == embedded


def test_the_hash_changes_only_for_chunks_embedded_under_parent_titles() -> None:
    # The hash the planner wrote before struct-v4, for every chunk.
    def before(path: str, text: str) -> str:
        return content_hash(path + "\n" + text)

    unchanged = [("", "Plain."), ("Ops > Backups", "Restore."), ("Guide", "# Guide\n\nIntro.")]
    for path, text in unchanged:
        assert parent_titles(path, text) == ""
        assert chunk_hash(path, text) == before(path, text)
    path, text = "Guide > Setup", "## Setup\n\nInstall it."
    assert parent_titles(path, text) == "Guide"
    assert chunk_hash(path, text) != before(path, text)
    assert chunk_hash(path, text) == chunk_hash(path, text)
