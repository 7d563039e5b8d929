"""What every settings class shares: the `RAG_` prefix of the environment
variables and the default data folder. Settings classes are built in
`services.runtime.settings`; `services.storage` reads these without the runtime.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_PREFIX = "RAG_"


def default_data_dir() -> Path:
    # The XDG spec: an unset *or empty* XDG_DATA_HOME means ~/.local/share (an
    # empty one put the whole index in ./rag-services, wherever the process ran).
    data_home = os.environ.get("XDG_DATA_HOME", "").strip()
    return Path(data_home or Path.home() / ".local" / "share") / "rag-services"
