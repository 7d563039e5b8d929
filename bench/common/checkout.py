"""A revision of this repository in a temporary detached `git worktree`, for
benches that measure two revisions side by side (`bench.load.scope_speed`,
`bench.load.observability_cost`): each stack is started from its worktree
with the same Python environment, its imports checked to come from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT


@dataclass
class Checkout:
    """The baseline revision in a temporary detached worktree; `path` None and
    `reason` set when it could not be made."""

    revision: str
    commit: str = ""
    path: Path | None = None
    reason: str = ""
    worktree: str = ""  # where it was (kept for the record after removal)
    _tmp: Path | None = None

    def open(self) -> Checkout:
        try:
            self.commit = _git("rev-parse", "--verify", f"{self.revision}^{{commit}}")
            self._tmp = Path(tempfile.mkdtemp(prefix="rag-baseline-"))
            path = self._tmp / "src"
            _git("worktree", "add", "--detach", str(path), self.commit)
            self.path, self.worktree = path, str(path)
            self._check_imports_from_worktree()
        except (OSError, RuntimeError) as exc:
            self.reason = f"no worktree of {self.revision}: {exc}"
            self.close()
        return self

    def _check_imports_from_worktree(self) -> None:
        assert self.path is not None
        done = subprocess.run(
            [sys.executable, "-c", "import services.stack as m; print(m.__file__)"],
            cwd=self.path,
            env=self.env({}),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        module = Path(done.stdout.strip() or "?")
        if done.returncode != 0 or not module.is_relative_to(self.path):
            raise RuntimeError(f"services.stack imports from {module}: {done.stderr[-500:]}")

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        assert self.path is not None
        inherited = os.environ.get("PYTHONPATH")
        pythonpath = os.pathsep.join([str(self.path), *([inherited] if inherited else [])])
        return {**env, "PYTHONPATH": pythonpath}

    def close(self) -> None:
        if self.path is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(self.path)],
                cwd=ROOT,
                capture_output=True,
                check=False,
                timeout=120,
            )
            self.path = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True, check=False)
            self._tmp = None

    def describe(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "commit": self.commit,
            "measured": not self.reason,
            "reason": self.reason,
            "worktree": self.worktree,
        }


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()
