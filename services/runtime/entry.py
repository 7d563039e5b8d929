"""The `main()` of every service process: `python -m services.indexer`,
`services.retriever`, `services.reranker`, `services.stack` and `gateway`.

    command line → threading and malloc policy → settings → parts → apps → run_main

`-h`/`--help` lists the environment variables the process reads and any other
argument is refused (exit status 2: a typo never starts a server on the
defaults); OpenMP threads are told to sleep when idle before a model library
is imported; then the service's `ServiceRecipe` runs under `run_main`: a
configuration error exits with status 2 and the message on stderr, SIGTERM
or SIGINT stops the apps gracefully and exits with status 0.

Only the command line and the settings classes are imported before the
help is printed; the recipe (its apps, models, stores) only after it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from services.runtime.cli_help import SettingsClasses, parse_command_line
from services.runtime.closed_pipe import stdout_closed
from services.runtime.cpu import prefer_passive_waits
from services.runtime.malloc_arenas import limit_malloc_arenas

if TYPE_CHECKING:
    from services.runtime.service import ServiceRecipe


def service_main(
    command: str,
    summary: str,
    settings_classes: SettingsClasses,
    recipe: Callable[[], ServiceRecipe[Any, Any]],
    argv: Sequence[str] | None = None,
) -> None:
    """Run the service `recipe()` makes; `settings_classes` are what its help
    lists (the classes its recipe loads)."""
    try:
        parse_command_line(command, summary, settings_classes, argv)
    except SystemExit:  # --help printed: its reader may have gone (`| head -1`)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            sys.exit(stdout_closed())
        raise
    except BrokenPipeError:
        sys.exit(stdout_closed())
    prefer_passive_waits()  # before torch is imported (see services.runtime.cpu)
    limit_malloc_arenas()  # before any worker thread (see services.runtime.malloc_arenas)

    from services.runtime.server import run_main
    from services.runtime.service import serve

    run_main(lambda: serve(recipe()))
