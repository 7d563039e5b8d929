"""PostgreSQL mode deployed as deploy/docker-compose.yml + docker-compose.postgres.yml
deploy it, on one machine: a real PostgreSQL server with pgvector
(tests/support/postgres.py), an Indexer, two Retriever replicas, the
Reranker (a tiny cross-encoder) and the gateway, each its own process
started as its container starts it (`python -m ...`), with the compose
environment (tests/deploy/local_deployment.py: mutual TLS and caller tokens
from `scripts/dev_secrets.py`, the default embedding model, the default
refresh of the commit point). Beyond making addresses and paths local, the
test changes two things: the gateway keeps its counters in memory (no Redis),
and the Indexer writes in batches of 64 chunks (RAG_WRITE_BATCH), so that a
run of a few hundred chunks is long enough to be killed while it writes.
Documents go in through the operator's CLI (`python -m services.operator.cli
ingest`, `stats`, `verify`), one request per ingest, so one run and one
generation per ingest.

Under a steady query load on both replicas (TLS + a reader token), it:

1. ingests a first corpus; both replicas answer from its generation without
   a restart (the refresh of the commit point; the seconds each took are
   recorded, not asserted: a loaded machine stretches them);
2. SIGKILLs one replica: the other keeps answering; restarted, it serves again;
3. starts a larger ingest, SIGKILLs the Indexer while the run is writing
   (its transaction holds the vectors table), finds none of its rows in any
   table, restarts the Indexer and runs the ingest again to completion;
4. checks every answer recorded meanwhile: each came from a committed
   generation (the one its page token names), and held only documents
   committed at or before it; none held a document of the killed run before
   that run was committed again;
5. both replicas converge on the final generation; `verify` is clean;
6. one search through the gateway over HTTP finds the expected page first.

Nothing asserts a latency; every wait is a bounded poll.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import httpx
import psycopg
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.retriever.paging import unverified_generation
from services.runtime.security.client import ClientSecurity, TokenSource, sync_channel
from services.runtime.security.tls import ClientTls
from tests.deploy.compose import active_services, load_compose
from tests.deploy.deployment_load import (
    CHANNEL_OPTIONS,
    SCOPE,
    QueryLoad,
    check_answers,
    retrieve,
    write_corpus,
)
from tests.deploy.local_deployment import (
    LocalService,
    local_command,
    make_secrets,
    process_env,
    service_env,
)
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.stack import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800), pytest.mark.long(seconds=55)]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE_FILES = (DEPLOY / "docker-compose.yml", DEPLOY / "docker-compose.postgres.yml")
# The compose file leaves RAG_COMMITTED_GENERATION_REFRESH_S at its default.
REFRESH_S = 1.0
# A hang guard, not a latency bound: a replica that never refreshes its commit
# point fails here (a query in flight on 2 busy cores took 8 s in one CI run).
CONVERGENCE_GUARD_S = 60.0
# A hang guard: a fresh data folder first builds the default model's graphs,
# which took over 180 s on a loaded 2-core machine.
START_TIMEOUT_S = 600.0
# Corpus B (about 280 chunks) is written in several batches: the Indexer runs
# with RAG_WRITE_BATCH=64 instead of the default 256 (the one setting the test
# adds to the compose environment), so its run starts writing after a few
# seconds of embedding and is still writing, or embedding the next batch
# inside the open transaction, when it is killed.
A_DOCS, B_DOCS = 24, 80
B_PARAGRAPHS = 5
WRITE_BATCH = 64
RETRIEVERS = ("retriever-1", "retriever-2")


# -- the deployment ----------------------------------------------------------------


@dataclass
class Deployment:
    model: dict[str, Any]
    workdir: Path
    secrets: Path
    postgres: PostgresServer
    postgres_url: str
    services: dict[str, LocalService] = field(default_factory=dict)
    clis: list[subprocess.Popen[str]] = field(default_factory=list)

    def cli(self, *args: str, ops: bool = False) -> subprocess.Popen[str]:
        """`indexer-cli` as the compose file runs it (`--addr indexer:50051`),
        with the writer's token, or with the ops (admin) token for stats and
        verify, as the compose file's comment says."""
        replace = {"RAG_INDEXER_TOKEN_FILE": "/run/secrets/ops-token"} if ops else {}
        env = service_env(self.model, "indexer-cli", self.secrets, replace)
        indexer = self.services["indexer"].address
        entry = [
            indexer if part == "indexer:50051" else part
            for part in self.model["services"]["indexer-cli"]["entrypoint"]
        ]
        process = subprocess.Popen(
            local_command([*entry, *args]),
            env=process_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.clis.append(process)
        return process

    def run_cli(self, *args: str, ops: bool = False, timeout_s: float = 300) -> str:
        process = self.cli(*args, ops=ops)
        out, err = process.communicate(timeout=timeout_s)
        assert process.returncode == 0, f"cli {args}: {process.returncode}\n{out}\n{err}"
        return out

    def stats(self) -> dict[str, Any]:
        return dict(json.loads(self.run_cli("stats", ops=True)))

    def ingest(self, folder: Path) -> subprocess.Popen[str]:
        # One request, so one run and one generation: the answers' check
        # maps each generation to the documents committed with it.
        return self.cli("ingest", str(folder), "--scope", SCOPE, "--batch", "500", "--quiet")


def local_postgres_url(compose_url: str, server: PostgresServer) -> str:
    """The compose POSTGRES_URL (role, password, database) at the test server."""
    parts = urlsplit(compose_url)
    credentials = parts.netloc.rsplit("@", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{credentials}@127.0.0.1:{server.port}"))


def create_role_and_database(server: PostgresServer, model: dict[str, Any]) -> None:
    """What the pgvector/pgvector image does with POSTGRES_USER/_PASSWORD/_DB."""
    env = model["services"]["postgres"]["environment"]
    user, password, database = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {user} LOGIN SUPERUSER PASSWORD '{password}'")
        conn.execute(f"CREATE DATABASE {database} OWNER {user}")


def build_services(deployment: Deployment, model_cache: Path) -> dict[str, LocalService]:
    """`model_cache`: one build of the embedding model for all (the image's
    /opt/models/embedding), the test session's: other tests may have built it.
    The Reranker serves the image's default model, the packaged one."""
    model, secrets, workdir = deployment.model, deployment.secrets, deployment.workdir
    ports = {name: free_port() for name in ("indexer", *RETRIEVERS, "reranker", "gateway")}
    models = str(model_cache)
    local = {
        "RAG_HOST": "127.0.0.1",
        "RAG_METRICS_HOST": "127.0.0.1",
        "RAG_EMBEDDING_CACHE_DIR": models,
        "POSTGRES_URL": deployment.postgres_url,
    }
    services = {}

    def add(name: str, compose_name: str, replace: Mapping[str, str | None]) -> None:
        env = service_env(model, compose_name, secrets, replace)
        env["RAG_DATA_DIR"] = str(workdir / "data" / name)  # the image's /var/lib/rag
        command = model["services"][compose_name]["command"]
        services[name] = LocalService(name, command, env, ports[name], workdir / f"{name}.log")

    add(
        "indexer",
        "indexer",
        local
        | {
            "RAG_INDEXER_PORT": str(ports["indexer"]),
            "RAG_INDEXER_METRICS_PORT": "0",
            "RAG_WRITE_BATCH": str(WRITE_BATCH),
        },
    )
    for name in RETRIEVERS:
        add(
            name,
            "retriever",
            local
            | {
                "RAG_RETRIEVER_PORT": str(ports[name]),
                "RAG_RETRIEVER_METRICS_PORT": "0",
                "RAG_RERANKER_ADDR": f"127.0.0.1:{ports['reranker']}",
            },
        )
    add(
        "reranker",
        "reranker",
        {
            "RAG_HOST": "127.0.0.1",
            "RAG_METRICS_HOST": "127.0.0.1",
            "RAG_RERANKER_PORT": str(ports["reranker"]),
            "RAG_RERANKER_METRICS_PORT": "0",
        },
    )
    gateway_origin = f"http://127.0.0.1:{ports['gateway']}"
    add(
        "gateway",
        "gateway",
        {
            "RAG_HOST": "127.0.0.1",
            "RAG_GATEWAY_PORT": str(ports["gateway"]),
            "RAG_GATEWAY_METRICS_HOST": "127.0.0.1",
            "RAG_GATEWAY_METRICS_PORT": "0",
            "RAG_RETRIEVER_ADDR": f"127.0.0.1:{ports['retriever-1']}",
            "RAG_GATEWAY_ALLOWED_ORIGINS": gateway_origin,
            "RAG_GATEWAY_REDIS_URL": None,  # no Redis here: counters in memory
        },
    )
    return services


def client_security(deployment: Deployment) -> ClientSecurity:
    """The gateway's identity (certificate and reader token) towards a Retriever."""
    env = deployment.services["gateway"].env
    tls = ClientTls(
        ca_file=Path(env["RAG_RETRIEVER_TLS_CA_FILE"]),
        cert_file=Path(env["RAG_RETRIEVER_TLS_CERT_FILE"]),
        key_file=Path(env["RAG_RETRIEVER_TLS_KEY_FILE"]),
    )
    return ClientSecurity(tls, TokenSource(path=Path(env["RAG_RETRIEVER_TOKEN_FILE"])))


@pytest.fixture
def deployment(tmp_path: Path, model_cache_dir: Path) -> Iterator[Deployment]:
    model = load_compose(*COMPOSE_FILES)
    assert "postgres" in active_services(model, ["postgres"])
    secrets = make_secrets(tmp_path / "secrets")
    with running_postgres() as server:
        create_role_and_database(server, model)
        url = local_postgres_url(
            model["services"]["indexer"]["environment"]["POSTGRES_URL"], server
        )
        deployment = Deployment(model, tmp_path, secrets, server, url)
        deployment.services = build_services(deployment, model_cache_dir)
        try:
            yield deployment
        finally:
            for process in deployment.clis:
                if process.poll() is None:
                    process.kill()
                    process.communicate(timeout=30)
            for service in deployment.services.values():
                service.stop()


# -- checks ------------------------------------------------------------------------


def wait_for(what: str, condition: Any, timeout_s: float, poll_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def converge(
    deployment: Deployment, security: ClientSecurity, generation: int, since: float
) -> dict[str, float]:
    """Seconds from `since` (the commit was reported) until each replica
    answered from `generation` or later (a hang guard bounds the wait)."""
    seconds = {}
    for name in RETRIEVERS:
        address = deployment.services[name].address
        with sync_channel(address, security, CHANNEL_OPTIONS) as channel:
            stub = retriever_pb2_grpc.RetrieverStub(channel)

            def served(stub: Any = stub) -> bool:
                token = retrieve(stub, "runbook").next_page_token
                return bool(token) and (unverified_generation(token) or 0) >= generation

            wait_for(f"{name} serves generation {generation}", served, CONVERGENCE_GUARD_S)
        seconds[name] = time.monotonic() - since
    return seconds


def run_lock_on_vectors(server: PostgresServer, schema: str) -> bool:
    """A run is writing: a transaction holds a row-exclusive lock on the
    schema's vectors table (taken by its first vector upsert, held to its end)."""
    with psycopg.connect(server.database_url("rag"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relname = 'vectors' AND l.mode = 'RowExclusiveLock' AND l.granted",
            (schema,),
        ).fetchone()
    return bool(row and row[0])


def rows_of(server: PostgresServer, schema: str, doc_ids: list[str]) -> dict[str, int]:
    """Rows of these documents in each part, read without the generation rule."""
    counts = {}
    with psycopg.connect(server.database_url("rag"), autocommit=True) as conn:
        for table in ("vectors", "chunks", "documents"):
            row = conn.execute(
                f"SELECT count(*) FROM {schema}.{table} WHERE doc_id = ANY(%s)", (doc_ids,)
            ).fetchone()
            counts[table] = int(row[0]) if row else -1
    return counts


# -- the test -------------------------------------------------------------------------


def test_postgres_deployment_survives_kills_and_serves_only_committed_data(
    deployment: Deployment,
) -> None:
    timings: dict[str, float] = {}
    began = time.monotonic()
    services = deployment.services
    corpus_a = write_corpus(deployment.workdir / "corpus-a", "alp", A_DOCS, paragraphs=2)
    corpus_b = write_corpus(deployment.workdir / "corpus-b", "drf", B_DOCS, B_PARAGRAPHS)

    # The Indexer first: it builds the embedding model's export every other
    # process then reads (compose starts the containers in dependency order).
    services["indexer"].start()
    services["reranker"].start()
    services["indexer"].wait_serving(START_TIMEOUT_S)
    for name in RETRIEVERS:
        services[name].start()
    for name in (*RETRIEVERS, "reranker"):
        services[name].wait_serving(START_TIMEOUT_S)
    services["gateway"].start()
    timings["start-up"] = time.monotonic() - began

    security = client_security(deployment)
    assert_tls_and_token_are_required(services["retriever-1"], security)
    queries = [
        f"what does error {corpus_a['alp-003.md']} mean",
        f"what does error {corpus_b['drf-007.md']} mean",
        "how do I restore the snapshot of a replica",
        f"what does error {corpus_b['drf-042.md']} mean",
        "rotate the lease of the tenant",
        f"what does error {corpus_b['drf-071.md']} mean",
    ]
    load = QueryLoad({name: services[name] for name in RETRIEVERS}, security, queries)
    load.start()
    try:
        commits: list[tuple[int, frozenset[str]]] = []

        # 1. the first corpus; both replicas converge on its generation.
        step = time.monotonic()
        before = int(deployment.stats()["committed_generation"])
        deployment_ingest(deployment, deployment.workdir / "corpus-a", len(corpus_a))
        committed = time.monotonic()
        gen_a = int(deployment.stats()["committed_generation"])
        assert gen_a > before
        commits.append((gen_a, frozenset(corpus_a)))
        convergence = {"a": converge(deployment, security, gen_a, committed)}
        timings["1 first corpus"] = time.monotonic() - step

        # 2. SIGKILL one replica under load; the other answers; it comes back.
        step = killed_at = time.monotonic()
        services["retriever-1"].kill()
        wait_for(
            "answers from retriever-2 while retriever-1 is down",
            lambda: len(load.answered("retriever-2", killed_at)) >= 3,
            60,
        )
        services["retriever-1"].start().wait_serving(START_TIMEOUT_S)
        back_at = time.monotonic()
        # Calls to the killed replica fail until its new process answers.
        down = load.between("retriever-1", killed_at + 0.5, back_at)
        assert down and all(a.error or a.start == 2 for a in down), down
        survivor = load.between("retriever-2", killed_at, back_at)
        assert survivor and not any(a.error for a in survivor), survivor
        wait_for(
            "retriever-1 answers again",
            lambda: any(
                a.start == 2 and a.generation == gen_a
                for a in load.answered("retriever-1", back_at)
            ),
            60,
        )
        timings["2 replica killed"] = time.monotonic() - step

        # 3. SIGKILL the Indexer while a larger run is writing.
        step = time.monotonic()
        killed_run = deployment.ingest(deployment.workdir / "corpus-b")
        in_flight_from = time.monotonic()
        wait_for(
            "the run writes (or the CLI ended first: make corpus B larger)",
            lambda: (
                killed_run.poll() is not None or run_lock_on_vectors(deployment.postgres, "rag")
            ),
            180,
            poll_s=0.05,
        )
        assert killed_run.poll() is None, "the run ended before it could be killed"
        timings["3a until the run writes"] = time.monotonic() - step
        services["indexer"].kill()
        out, err = killed_run.communicate(timeout=60)
        assert killed_run.returncode == 2 and "UNAVAILABLE" in err, (out, err)
        # The server rolled the run back: none of its rows, even above the commit point.
        assert rows_of(deployment.postgres, "rag", sorted(corpus_b)) == {
            "vectors": 0,
            "chunks": 0,
            "documents": 0,
        }
        # The load goes on against an index with no Indexer for a few refreshes.
        time.sleep(REFRESH_S * 2)
        services["indexer"].start().wait_serving(START_TIMEOUT_S)
        stats = deployment.stats()
        # Its start-up recovery finds nothing to undo (the server rolled back).
        counts = [int(stats[k]) for k in ("committed_generation", "documents", "pending_documents")]
        assert counts == [gen_a, A_DOCS, 0], stats
        rerun_started = time.monotonic()
        timings["3b indexer back"] = rerun_started - step
        deployment_ingest(deployment, deployment.workdir / "corpus-b", len(corpus_b))
        committed = time.monotonic()
        gen_b = int(deployment.stats()["committed_generation"])
        assert gen_b > gen_a
        commits.append((gen_b, frozenset(corpus_b)))
        timings["3 indexer killed"] = time.monotonic() - step

        # 5. both replicas converge on the final generation; verify is clean.
        step = time.monotonic()
        convergence["b"] = converge(deployment, security, gen_b, committed)
        report = json.loads(deployment.run_cli("verify", "--json", "--quiet", ops=True))
        assert report.get("clean") is True, report
        assert int(report["committed_generation"]) == gen_b, report
        assert int(report["documents"]) == A_DOCS + B_DOCS, report
        # Each replica serves a page of B to the load itself, not only to
        # converge's probe: on a loaded machine a round of the load can take
        # seconds, and verify can end before the first round that asks for B.
        for name in RETRIEVERS:
            wait_for(
                f"{name} serves a page of B to the load",
                lambda name=name: any(
                    set(a.doc_ids) & set(corpus_b) for a in load.answered(name, committed)
                ),
                CONVERGENCE_GUARD_S,
            )
        timings["5 verify"] = time.monotonic() - step
    finally:
        load.stop()

    # 4. every answer recorded during the whole run came from committed data.
    answers = load.answers
    problems = check_answers(answers, commits, set(corpus_b), rerun_started)
    assert not problems, "\n".join(problems[:20])
    for name in RETRIEVERS:
        mine = [a for a in answers if a.replica == name and not a.error]
        in_flight = load.between(name, in_flight_from, rerun_started)
        assert in_flight, f"{name}: no answer while the killed run was in flight"
        # The Indexer's death and restart cost the replicas nothing.
        assert not any(a.error for a in in_flight), [a for a in in_flight if a.error]
        assert {a.generation for a in in_flight} == {gen_a}, name
        assert any(a.reranked for a in mine), f"{name}: the Reranker was never used"
        assert any(set(a.doc_ids) & set(corpus_b) for a in mine), f"{name}: never served B"

    # 6. one search through the gateway over HTTP.
    step = time.monotonic()
    expected = "drf-042.md"
    hits = gateway_search(services["gateway"], f"what does error {corpus_b[expected]} mean")
    assert hits[0]["doc_id"] == expected, hits
    timings["6 gateway"] = time.monotonic() - step
    timings["total"] = time.monotonic() - began
    summary = {
        "answers": len(answers),
        "errors": sum(1 for a in answers if a.error),
        "generations": [gen_a, gen_b],
        "convergence_s": convergence,
        "timings_s": timings,
    }
    print(json.dumps(summary, indent=1, default=lambda v: round(v, 2)))


def deployment_ingest(deployment: Deployment, folder: Path, documents: int) -> None:
    process = deployment.ingest(folder)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, (out, err)
    assert f"added={documents}," in out, out


def assert_tls_and_token_are_required(replica: LocalService, security: ClientSecurity) -> None:
    """The replica refuses a client without a token, and one without TLS."""
    assert security.tls is not None
    for name, insecure in (
        ("no token", ClientSecurity(security.tls)),
        ("plaintext", ClientSecurity(token=security.token)),
    ):
        with sync_channel(replica.address, insecure) as channel:
            stub = retriever_pb2_grpc.RetrieverStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                retrieve(stub, "runbook", timeout_s=10)
        expected = (
            grpc.StatusCode.UNAUTHENTICATED if name == "no token" else grpc.StatusCode.UNAVAILABLE
        )
        assert err.value.code() == expected, name


def gateway_search(gateway: LocalService, query: str) -> list[dict[str, Any]]:
    """POST /v1/search from the gateway's own origin once /readyz says ready
    (the compose health check)."""
    base = f"http://{gateway.address}"

    def ready() -> bool:
        gateway.check_alive()
        return _status(f"{base}/readyz") == 200

    wait_for("the gateway is ready", ready, START_TIMEOUT_S, poll_s=0.3)
    reply = httpx.post(
        f"{base}/v1/search",
        json={"query": query, "top_k": 3},
        headers={"Origin": base},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    return list(reply.json()["hits"])


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=3).status_code
    except httpx.TransportError:
        return 0
