"""`python -m tests.support.child_of PARENT_PID MODULE`: run MODULE as
`python -m MODULE` would, killed (SIGKILL) when the process PARENT_PID dies.

The crash loop starts the stack in a session of its own (so that its kill
reaches the whole group); a test run stopped from outside (a timeout, Ctrl-C
on the driver) would otherwise leave that stack running, on the 2 shared
cores. Linux only (prctl PR_SET_PDEATHSIG), as the stack's own optimizer
child does (services.storage.embedded.edge_optimizer.exit_with_parent)."""

from __future__ import annotations

import runpy
import sys

from services.storage.embedded.edge_optimizer import exit_with_parent


def main(argv: list[str]) -> None:
    parent, module = int(argv[0]), argv[1]
    exit_with_parent(parent)
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
