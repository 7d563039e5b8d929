"""The client package stands apart from the services: importing it loads no
service code, only the generated protobuf stubs (and their parent packages,
which are empty)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

ALLOWED = {"services", "services.contract", "services.contract.genproto"}


def test_importing_the_client_loads_only_the_generated_stubs_of_the_services() -> None:
    script = (
        "import sys, rag_client\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in ('services', 'gateway')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out, "the stubs are expected under services.contract.genproto"
    strays = [
        m for m in out if m not in ALLOWED and not m.startswith("services.contract.genproto.")
    ]
    assert strays == []
