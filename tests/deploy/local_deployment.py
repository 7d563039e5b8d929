"""The compose deployment's services as local processes, for
tests/deploy/test_postgres_deployment.py.

Each service is started the way its container starts it (`python -m MODULE`)
with the environment deploy/docker-compose.yml (+ an override file) gives it,
read from the file itself (`tests/deploy/compose.py`), and with its secrets
made by `scripts/dev_secrets.py`, as the compose file asks. Only what a
container gets from its own network and filesystem is replaced, each
replacement named in `LocalService.env` by its caller:

- `/run/secrets/<target>` becomes the file the compose `secrets:` entry names;
- addresses and ports (`reranker:50053`, `RAG_*_PORT`) become free local ports,
  `0.0.0.0` becomes `127.0.0.1` (several test runs may share the machine);
- paths inside the image (`/opt/models/embedding`, `/var/lib/rag`) become
  folders of the test; all processes share the session's embedding-model
  graphs, as the containers share the image's. The packaged models' files
  are this virtualenv's, as the image's are its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from services.runtime.healthcheck import is_serving, own_server_security
from tests.deploy.compose import environment

ROOT = Path(__file__).resolve().parents[2]
SECRETS_PREFIX = "/run/secrets/"
# Variables a test process may carry that would change a service's
# configuration: the services get the compose environment, not the test's.
_OWN_PREFIXES = ("RAG_", "POSTGRES_", "QDRANT_", "OPENSEARCH_", "OTEL_")
# What the image's Dockerfile sets (ENV) that a local process needs too.
IMAGE_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def make_secrets(folder: Path) -> Path:
    """`scripts/dev_secrets.py FOLDER`, as deploy/docker-compose.yml asks."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dev_secrets.py"), str(folder)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder


def secret_files(model: Mapping[str, Any], service: str, secrets_dir: Path) -> dict[str, Path]:
    """`/run/secrets/` target name → the local file, for one compose service."""
    files: dict[str, Path] = {}
    for entry in model["services"][service].get("secrets", []):
        if isinstance(entry, str):
            source = target = entry
        else:
            source, target = entry["source"], entry.get("target", entry["source"])
        relative = Path(model["secrets"][source]["file"])  # ./secrets/<file>
        assert relative.parts[0] == "secrets", relative
        files[target] = secrets_dir.joinpath(*relative.parts[1:])
    return files


def service_env(
    model: Mapping[str, Any], service: str, secrets_dir: Path, replace: Mapping[str, str | None]
) -> dict[str, str]:
    """The compose service's environment with its secrets as local files and
    `replace` applied (None removes a variable)."""
    env = environment(model["services"][service])
    for name, new in replace.items():
        assert name in env or new is not None, f"{service}: {name} is not in the compose file"
        if new is None:
            env.pop(name, None)
        else:
            env[name] = new
    files = secret_files(model, service, secrets_dir)
    for name, value in env.items():
        if value.startswith(SECRETS_PREFIX):
            env[name] = str(files[value.removeprefix(SECRETS_PREFIX)])
    return env


def local_command(command: list[str]) -> list[str]:
    """A container's `python -m ...` as this machine's interpreter runs it."""
    return [sys.executable if part == "python" else part for part in command]


def process_env(env: Mapping[str, str]) -> dict[str, str]:
    """The machine's environment without the test's own settings, plus the
    image's and the service's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES)}
    return {**base, **IMAGE_ENV, **env}


@dataclass
class LocalService:
    """One service process; `start` may be called again after `kill`/`stop`."""

    name: str
    command: list[str]
    env: dict[str, str]
    port: int  # its gRPC or HTTP port
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalService:
        assert self.process is None or self.process.poll() is not None, f"{self.name} runs"
        self._log = self.log_path.open("ab")
        self._log.write(f"\n----- start {self.starts + 1} -----\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            local_command(self.command),
            cwd=ROOT,
            env=process_env(self.env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1
        return self

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise AssertionError(f"{self.name} exited ({code}):\n{self.tail()}")

    def wait_serving(self, timeout_s: float) -> None:
        """Until its gRPC health check answers SERVING, checked the way the
        compose health check does (services.runtime.healthcheck with the
        server's own TLS settings)."""
        security = own_server_security(self.env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            if is_serving(self.address, security=security, timeout_s=2.0):
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.name} not serving after {timeout_s} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL: no handler runs, as an OOM kill or a lost node."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._close_log()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not stopped within 20 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no output)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])
