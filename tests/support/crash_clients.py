"""The crash loop's clients (tests.support.crash_loop): a writer that upserts
small documents, each with a unique token, and keeps a ledger of what the
Indexer acknowledged, and a reader that runs Retrieve throughout. Both talk
to whatever stack is current (`Endpoints`), and count what fails while it
is down rather than stopping."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import grpc

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc

SCOPE = "crashloop"
UPSERT_TIMEOUT_S = 60.0
RETRIEVE_TIMEOUT_S = 15.0
PAUSE_AFTER_ERROR_S = 0.25  # while the stack is down: no busy loop
READ_PAUSE_S = 0.1  # the reader leaves the 2 cores to the stack
# A channel reconnects within half a second once the restarted stack listens
# (gRPC's default backoff grows to minutes while a slow start refuses it).
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]
# Consonants only (no s, y): a token no stemmer shortens into another's.
TOKEN_LETTERS = "bcdfghjklmnpqrtvwxz"
FILLER_TEXT = (
    "the index keeps every chunk in step across both stores while a writer sends pages "
    "and a reader asks questions about ports restarts backups deadlines and recovery "
    "a crash may land at any moment so each run is written under intents and committed "
    "once both stores accepted it"
)
FILLER = FILLER_TEXT.split()


def token_for(number: int) -> str:
    """A unique word per document: `zq` + its number in consonants + `k`."""
    letters = []
    for _ in range(6):
        number, digit = divmod(number, len(TOKEN_LETTERS))
        letters.append(TOKEN_LETTERS[digit])
    return "zq" + "".join(reversed(letters)) + "k"


def token_of(doc_id: str) -> str:
    return token_for(int(doc_id.removeprefix("crash-")))


def document(number: int, rng: random.Random) -> ipb.Document:
    """1 to 5 paragraphs (1 to 3 chunks), the token in the first and last."""
    token = token_for(number)
    paragraphs = [
        " ".join(rng.choice(FILLER) for _ in range(rng.randint(40, 60))).capitalize() + "."
        for _ in range(rng.randint(1, 5))
    ]
    paragraphs[0] = f"Marker {token}. {paragraphs[0]}"
    paragraphs[-1] = f"{paragraphs[-1]} Marker {token} again."
    return ipb.Document(
        doc_id=f"crash-{number:06d}",
        title=f"Crash loop page {number}",
        url=f"https://crash.test/{number}",
        scope_id=SCOPE,
        locale="en",
        text=f"# Crash loop page {number}\n\n" + "\n\n".join(paragraphs) + "\n",
        content_type=ipb.CONTENT_TYPE_MARKDOWN,
    )


class Endpoints:
    """The current stack's addresses (the loop publishes each restart's);
    `serving` is set while it is known to be ready."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self.indexer_addr = self.retriever_addr = ""
        self.serving = threading.Event()

    def publish(self, indexer_addr: str, retriever_addr: str) -> None:
        with self._lock:
            self.indexer_addr, self.retriever_addr = indexer_addr, retriever_addr
            for addr in list(self._channels):
                if addr not in (indexer_addr, retriever_addr):
                    self._channels.pop(addr).close()  # a dead stack's

    def _channel(self, addr: str) -> grpc.Channel:
        with self._lock:
            if addr not in self._channels:
                self._channels[addr] = grpc.insecure_channel(addr, CHANNEL_OPTIONS)
            return self._channels[addr]

    def indexer(self) -> indexer_pb2_grpc.IndexerStub:
        return indexer_pb2_grpc.IndexerStub(self._channel(self.indexer_addr))

    def retriever(self) -> retriever_pb2_grpc.RetrieverStub:
        return retriever_pb2_grpc.RetrieverStub(self._channel(self.retriever_addr))

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()


@dataclass(frozen=True)
class Batch:
    """One Upsert call: when it ran and whether it was acknowledged."""

    started: float
    ended: float
    acknowledged: bool
    doc_ids: tuple[str, ...]


@dataclass
class Ledger:
    """Every document the writer sent, acknowledged or not."""

    documents: dict[str, ipb.Document] = field(default_factory=dict)
    acknowledged: dict[str, int] = field(default_factory=dict)  # doc_id -> its chunks
    rejected: list[str] = field(default_factory=list)  # refused as input: a driver bug
    batches: list[Batch] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, docs: list[ipb.Document], started: float, reply: ipb.UpsertResponse | None):
        with self.lock:
            ids = tuple(d.doc_id for d in docs)
            self.documents.update((d.doc_id, d) for d in docs)
            self.batches.append(Batch(started, time.monotonic(), reply is not None, ids))
            for outcome in reply.outcomes if reply is not None else []:
                if outcome.state == ipb.DOCUMENT_STATE_ADDED:
                    self.acknowledged[outcome.doc_id] = outcome.chunks
                else:
                    self.rejected.append(f"{outcome.doc_id}: {outcome.error or outcome.state}")

    def unacknowledged(self) -> list[str]:
        with self.lock:
            return [doc_id for doc_id in self.documents if doc_id not in self.acknowledged]

    def random_acknowledged(self, rng: random.Random) -> str | None:
        with self.lock:
            if not self.acknowledged:
                return None
            return rng.choice(list(self.acknowledged))  # a few thousand at most


class Writer:
    def __init__(self, endpoints: Endpoints, ledger: Ledger, seed: int) -> None:
        self.endpoints, self.ledger = endpoints, ledger
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.stop.is_set():
            docs = [self._next_document() for _ in range(self.rng.randint(1, 3))]
            started = time.monotonic()
            request = ipb.UpsertRequest(documents=docs)
            try:
                reply = self.endpoints.indexer().Upsert(request, timeout=UPSERT_TIMEOUT_S)
            except grpc.RpcError as exc:
                self.ledger.record(docs, started, None)
                self.ledger.errors[str(exc.code())] += 1
                self.stop.wait(PAUSE_AFTER_ERROR_S)
                continue
            self.ledger.record(docs, started, reply)

    def _next_document(self) -> ipb.Document:
        self.sent += 1
        return document(self.sent, self.rng)


@dataclass
class ReadFigures:
    answered: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    # An acknowledged document its token did not find, in a full answer (no
    # channel degraded): a read that lost an acknowledged write.
    acknowledged_missed: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {
            "answered": self.answered,
            "errors": dict(self.errors),
            "acknowledged_missed": len(self.acknowledged_missed),
        }


class Reader:
    def __init__(self, endpoints: Endpoints, ledger: Ledger, seed: int) -> None:
        self.endpoints, self.ledger = endpoints, ledger
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.figures = ReadFigures()

    def run(self) -> None:
        while not self.stop.is_set():
            doc_id = self.ledger.random_acknowledged(self.rng)
            query = token_of(doc_id) if doc_id else "restarts after a crash"
            request = rpb.RetrieveRequest(query=query, top_k=5, disable_rerank=True)
            try:
                reply = self.endpoints.retriever().Retrieve(request, timeout=RETRIEVE_TIMEOUT_S)
            except grpc.RpcError as exc:
                self.figures.errors[str(exc.code())] += 1
                self.stop.wait(PAUSE_AFTER_ERROR_S)
                continue
            self.figures.answered += 1
            found = {hit.doc_id for hit in reply.hits}
            if doc_id and not reply.degraded and doc_id not in found:
                self.figures.acknowledged_missed.append(doc_id)
            self.stop.wait(READ_PAUSE_S)
