"""A write that fails in tantivy's commit does not break the store for good.

Before: one "Too many open files" during a commit (a flood of connections had
taken the process's descriptors) left tantivy's writer without its threads
and its lock, and every later write of the process failed ("The IndexWriter
does not have any lock") until a restart. The fault is real here: a child
process lowers its own open-file limit, takes every descriptor left, writes,
gives them back and writes again."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

SCENARIO = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from services.core.deadline import Deadline
    from services.core.models import ScopeFilter
    from services.storage.embedded.tantivy_store import TantivyLexicalStore
    from tests.storage.harness import make_chunk

    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    store = TantivyLexicalStore(Path(sys.argv[1]))
    outcome = {}
    def write(doc_id):
        try:
            store.upsert([make_chunk(doc_id)], Deadline.after(10))
            return "ok"
        except Exception as exc:
            return type(exc).__name__ + ": " + str(exc)[:400]
    outcome["before"] = write("before")
    held = []
    try:
        while True:
            held.append(open("/dev/null"))
    except OSError:
        pass
    outcome["without descriptors"] = write("lost")
    for handle in held:
        handle.close()
    outcome["after"] = [write(f"after-{i}") for i in range(2)]
    outcome["count"] = store.count(ScopeFilter(), Deadline.after(10))
    outcome["lost visible"] = bool(store.get([make_chunk("lost").chunk_id], Deadline.after(10)))
    store.close()
    print(json.dumps(outcome))
    """
)


def test_the_next_write_after_a_failed_commit_succeeds_and_the_failed_batch_is_gone(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path / "lexical")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["before"] == "ok"
    assert "TooManyOpenFiles" in outcome["without descriptors"]
    assert outcome["after"] == ["ok", "ok"]
    assert outcome["count"] == 3  # before, after-0, after-1
    assert outcome["lost visible"] is False
