"""The PostgreSQL deployment test's corpus and query load
(tests/deploy/test_postgres_deployment.py): Markdown pages each holding its
own error code, and a thread sending Retrieve calls to every replica with
TLS and a token, recording each answer with the generation it came from."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.retriever.paging import unverified_generation
from services.runtime.security.client import ClientSecurity, sync_channel
from tests.deploy.local_deployment import LocalService

SCOPE = "handbook"
# Pause between two rounds of queries (one per replica): a bounded load.
LOAD_PAUSE_S = 0.25


# -- corpus ----------------------------------------------------------------------

WORDS = (
    "archive",
    "bucket",
    "checksum",
    "cluster",
    "compaction",
    "cursor",
    "daemon",
    "digest",
    "endpoint",
    "failover",
    "firmware",
    "gateway",
    "handshake",
    "heartbeat",
    "journal",
    "kernel",
    "lease",
    "ledger",
    "manifest",
    "mirror",
    "namespace",
    "outage",
    "partition",
    "payload",
    "quorum",
    "replica",
    "rollback",
    "runbook",
    "schema",
    "shard",
    "snapshot",
    "spool",
    "telemetry",
    "tenant",
    "throttle",
    "token",
    "upgrade",
    "vacuum",
    "volume",
    "watermark",
    "window",
    "worker",
    "beacon",
    "cipher",
    "conduit",
    "lantern",
    "meadow",
    "orchard",
    "quarry",
    "harbor",
    "summit",
)
VERBS = (
    "rotate",
    "restore",
    "drain",
    "verify",
    "pause",
    "resume",
    "compact",
    "replay",
    "seal",
    "mount",
)


def _paragraph(rng: random.Random, code: str, topic: str) -> str:
    sentences = []
    for _ in range(5):
        a, b, c = rng.sample(WORDS, 3)
        verb = rng.choice(VERBS)
        sentences.append(f"To {verb} the {a} of the {topic} {b}, check the {c} first.")
    sentences.append(f"The {topic} reports {code} when that step fails.")
    return " ".join(sentences)


def write_corpus(folder: Path, prefix: str, count: int, paragraphs: int) -> dict[str, str]:
    """Markdown pages `<prefix>-NNN.md`, each with its own error code
    (`<PREFIX>-<4 digits>`, an exact identifier); doc_id → code."""
    folder.mkdir(parents=True)
    codes = {}
    for i in range(count):
        rng = random.Random(f"{prefix}{i}")
        code = f"{prefix.upper()}-{4000 + i}"
        topic = rng.choice(WORDS)
        body = "\n\n".join(_paragraph(rng, code, topic) for _ in range(paragraphs))
        name = f"{prefix}-{i:03d}.md"
        (folder / name).write_text(f"# Runbook {prefix.upper()} {i}: the {topic}\n\n{body}\n")
        codes[name] = code
    return codes


# -- the query load --------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    replica: str
    start: int  # which start of the replica's process answered
    sent_at: float
    received_at: float
    query: str
    generation: int | None = None  # the page token's: the committed generation served
    doc_ids: tuple[str, ...] = ()
    reranked: bool = False
    error: str = ""
    degraded: tuple[str, ...] = ()  # the components that failed, as the answer says


# Fast reconnection after a replica comes back (the default backoff grows to minutes).
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def retrieve(stub: Any, query: str, timeout_s: float = 20.0) -> rpb.RetrieveResponse:
    request = rpb.RetrieveRequest(query=query, top_k=3, filter=rpb.ScopeFilter(scope_id=SCOPE))
    return stub.Retrieve(request, timeout=timeout_s)


def answer_of(replica: str, start: int, sent: float, query: str, stub: Any) -> Answer:
    try:
        reply = retrieve(stub, query)
    except grpc.RpcError as exc:
        return Answer(replica, start, sent, time.monotonic(), query, error=exc.code().name)
    token = reply.next_page_token
    return Answer(
        replica,
        start,
        sent,
        time.monotonic(),
        query,
        generation=unverified_generation(token) if token else None,
        doc_ids=tuple(hit.doc_id for hit in reply.hits),
        reranked=reply.rerank.used,
        degraded=tuple(d.component for d in reply.degraded),
    )


class QueryLoad(threading.Thread):
    """Retrieve calls to every replica in turn, a pause between rounds, each
    answer recorded with the generation it came from."""

    def __init__(
        self, replicas: dict[str, LocalService], security: ClientSecurity, queries: list[str]
    ) -> None:
        super().__init__(name="query-load", daemon=True)
        self.replicas, self.queries = replicas, queries
        self.channels = {
            name: sync_channel(service.address, security, CHANNEL_OPTIONS)
            for name, service in replicas.items()
        }
        self.answers: list[Answer] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        # One query a round, to every replica: with a query per call, two
        # replicas and an even number of queries, each replica only ever got
        # its half of them (retriever-1 never asked for a document of B).
        turn = 0
        while not self.stopping.is_set():
            query = self.queries[turn % len(self.queries)]
            turn += 1
            for name, channel in self.channels.items():
                stub = retriever_pb2_grpc.RetrieverStub(channel)
                start, sent = self.replicas[name].starts, time.monotonic()
                self.answers.append(answer_of(name, start, sent, query, stub))
            self.stopping.wait(LOAD_PAUSE_S)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)
        for channel in self.channels.values():
            channel.close()

    def between(self, replica: str, since: float, until: float) -> list[Answer]:
        return [
            a for a in list(self.answers) if a.replica == replica and since <= a.sent_at <= until
        ]

    def answered(self, replica: str, since: float) -> list[Answer]:
        """The replica's answers (not errors) to calls sent since `since`."""
        return [a for a in self.between(replica, since, time.monotonic()) if not a.error]


def committed_at(commits: list[tuple[int, frozenset[str]]], generation: int) -> set[str]:
    return set().union(*(docs for g, docs in commits if g <= generation))


def check_answers(
    answers: list[Answer],
    commits: list[tuple[int, frozenset[str]]],
    killed_docs: set[str],
    rerun_started: float,
) -> list[str]:
    """Every way an answer could have shown data that was not committed."""
    problems = []
    committed_generations = {0} | {g for g, _ in commits}
    last: dict[tuple[str, int], int] = {}
    for a in answers:
        if a.error:
            continue
        if a.generation is None:
            if a.doc_ids:
                problems.append(f"{a}: hits without a page token (no generation)")
            # No hits, so no token and nothing served: it says nothing of a
            # generation (on a loaded machine a degraded answer can be empty:
            # the vector channel past its deadline, no word of the question
            # in the lexical index).
            continue
        generation = a.generation or 0
        if generation not in committed_generations:
            problems.append(f"{a}: generation {generation} was never committed")
        extra = set(a.doc_ids) - committed_at(commits, generation)
        if extra:
            problems.append(f"{a}: {sorted(extra)} not committed at generation {generation}")
        if a.sent_at < rerun_started and killed_docs & set(a.doc_ids):
            problems.append(f"{a}: a document of the killed run before its re-run")
        key = (a.replica, a.start)
        if generation < last.get(key, 0):
            problems.append(f"{a}: generation went back from {last[key]}")
        last[key] = max(last.get(key, 0), generation)
    return problems
