"""Every RPC of the Indexer, Retriever and Reranker, fuzzed against one real
stack (embedded stores in a tmp dir, the real embedding model, a tiny
cross-encoder): (a) well-shaped random messages built from the message
descriptors (so new fields and RPCs are covered without touching this file):
unicode and control characters, huge and negative numbers, unknown enum
numbers, random map entries; (b) random and corrupted raw bytes sent through
an identity serializer. A caller's mistake is never INTERNAL or UNKNOWN.

Requests are real: writes happen (dry_run is random), Sync and Delete may
remove documents, Verify may repair; only status codes are asserted."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.contract.genproto.rag.indexer.v1 import indexer_pb2
from services.contract.genproto.rag.reranker.v1 import reranker_pb2
from services.contract.genproto.rag.retriever.v1 import retriever_pb2
from services.embedding.embedder import Embedder
from services.reranker.app import RerankerApp
from services.reranker.settings import RerankerSettings
from services.runtime.settings import load_settings
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundLoop, BackgroundStack
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration

ALLOWED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
        # A Sync whose `no_sync_since` predates another sync of its scope
        # (services/indexer/sync_guard.py): the request meets the index's
        # state, as FAILED_PRECONDITION does (a random run drew one).
        grpc.StatusCode.ABORTED,
    }
)
CALL_TIMEOUT_S = 60
SERVICES = {
    "indexer": indexer_pb2.DESCRIPTOR.services_by_name["Indexer"],
    "retriever": retriever_pb2.DESCRIPTOR.services_by_name["Retriever"],
    "reranker": reranker_pb2.DESCRIPTOR.services_by_name["Reranker"],
}
# Examples per RPC: fewer where each one embeds documents or scans the index.
EXAMPLES = {"Upsert": 40, "UpsertStream": 30, "Sync": 40, "Verify": 20, "Stats": 20}
DEFAULT_EXAMPLES = 60
RAW_EXAMPLES = 40
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


# --- messages from descriptors ------------------------------------------------

# Mixed in for fields of these names so that some requests get past the first
# check and reach the stores and the models; every field also gets random values.
HINTS: dict[str, list[Any]] = {
    "locale": ["", "en", "de", "zh", "pt-BR"],
    "query_language": ["", "en", "zh"],
    "scope_id": ["", "site", "handbook", "fuzz-1"],
    "doc_id": ["backups.md", "fuzz.md", "a/b.md"],
    "query": ["backups", "how do I roll back a deployment", "429 error"],
    "text": ["# Fuzz\n\nA page about canary rollouts and backups.", "body"],
    "record_json": ['{"passed": true}', "{}", "[]", "null"],
    "url": ["https://docs.example/backups"],
}
_CHARS = st.characters(codec="utf-8")  # any code point but the lone surrogates
_INTERESTING = ["", " ", "\x00", "\n", "\u2028", "\x85", "é", "中文", "=", "a=b", "🙂"]
STRINGS = st.one_of(
    st.text(_CHARS, max_size=40),
    st.text(string.printable, max_size=40),
    st.sampled_from(_INTERESTING),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", " ", "\x00", "界"]), st.integers(0, 3000)),
)

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(max(lo, -3), min(hi, 100)), st.sampled_from([lo, hi]), st.integers(lo, hi)
    )


def scalar(field: Any) -> st.SearchStrategy[Any]:  # a FieldDescriptor
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        hints = HINTS.get(field.name)
        return st.one_of(*[st.sampled_from(hints)] * 3, STRINGS) if hints else STRINGS
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return st.one_of(st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True))
    if kind == FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32, allow_nan=True, allow_infinity=True)
    if kind == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(*[st.sampled_from(known)] * 3, _integers(-(2**31), 2**31 - 1))
    if kind in _INT_RANGES:
        return _integers(*_INT_RANGES[kind])
    if kind == FieldDescriptor.TYPE_MESSAGE:
        return fields_of(field.message_type)
    raise AssertionError(f"no strategy for {field.full_name} (type {kind})")


def _is_map(field: Any) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def value_of(field: Any) -> st.SearchStrategy[Any]:
    if _is_map(field):
        entry = field.message_type
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return st.dictionaries(scalar(key), scalar(value), max_size=6)
    if field.is_repeated:
        return st.lists(scalar(field), max_size=6)
    return scalar(field)


def _later(field: Any) -> st.SearchStrategy[Any]:
    """Built when first drawn (a message type may contain itself)."""
    return st.deferred(lambda: value_of(field))


def fields_of(descriptor: Descriptor) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments for `descriptor`'s message: any subset of its fields."""
    optional = {f.name: _later(f) for f in descriptor.fields}
    return st.fixed_dictionaries({}, optional=optional)


def message_class(descriptor: Descriptor) -> Any:
    return message_factory.GetMessageClass(descriptor)


def messages(descriptor: Descriptor) -> st.SearchStrategy[Any]:
    cls = message_class(descriptor)
    return fields_of(descriptor).map(lambda kwargs: cls(**kwargs))


def _seed_document(doc_id: str, scope_id: str = "fuzz-1") -> dict[str, Any]:
    text = "# Fuzz page\n\nCanary rollouts, backups and the 429 error explained."
    return {"doc_id": doc_id, "scope_id": scope_id, "locale": "en", "text": text}


# Valid requests that random edits start from, so that most requests get past
# the first check and reach the stores and the models. Types not listed start
# from the empty message.
SEEDS: dict[str, list[dict[str, Any]]] = {
    "rag.indexer.v1.UpsertRequest": [
        {"documents": [_seed_document("fuzz.md"), _seed_document("fuzz-2.md")]},
        {"documents": [_seed_document("fuzz.md")], "dry_run": True},
    ],
    "rag.indexer.v1.SyncRequest": [
        {"scope_id": "fuzz-1", "documents": [_seed_document("fuzz.md")], "dry_run": True},
        {"scope_id": "fuzz-2", "keep": [{"doc_id": "fuzz.md", "locale": "en"}]},
    ],
    "rag.indexer.v1.DeleteRequest": [{"doc_ids": ["fuzz-2.md", "backups.md"], "dry_run": True}],
    "rag.indexer.v1.RecordReleaseRequest": [{"record_json": '{"passed": true}', "passed": True}],
    "rag.retriever.v1.RetrieveRequest": [
        {"query": "how are backups taken", "top_k": 5},
        {"query": "deploy", "filter": {"scope_id": "handbook", "locale": "en"}, "debug": True},
        {"query": "this page", "page_url": "https://docs.example/backups", "intent": 2},
    ],
    "rag.reranker.v1.RerankRequest": [{"query": "backups", "passages": ["a", "backups nightly"]}],
}


@st.composite
def edited(draw: st.DrawFn, descriptor: Descriptor) -> Any:
    """A seed request with up to three fields replaced by random values, at
    any depth (a document's field, a filter's list, ...)."""
    cls = message_class(descriptor)
    seeds = [cls(**kwargs) for kwargs in SEEDS.get(descriptor.full_name, [{}])]
    request = cls()
    request.CopyFrom(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        _edit(draw, request)
    return request


def _edit(draw: st.DrawFn, message: Any) -> None:
    fields = message.DESCRIPTOR.fields
    if not fields:
        return
    field = draw(st.sampled_from(list(fields)))
    value = getattr(message, field.name)
    if field.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(field):
        if field.is_repeated and len(value) and draw(st.booleans()):
            return _edit(draw, value[draw(st.integers(0, len(value) - 1))])
        if not field.is_repeated and draw(st.booleans()):
            return _edit(draw, value)
    message.ClearField(field.name)
    message.MergeFrom(type(message)(**{field.name: draw(value_of(field))}))


def requests(descriptor: Descriptor) -> st.SearchStrategy[Any]:
    return st.one_of(edited(descriptor), edited(descriptor), messages(descriptor))


def corrupted(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """Random bytes, and valid messages with bytes overwritten or cut short."""

    def damage(data: bytes, at: int, junk: bytes, cut: bool) -> bytes:
        at = at % (len(data) + 1)
        return data[:at] if cut else data[:at] + junk + data[at + len(junk) :]

    valid = requests(descriptor).map(lambda m: m.SerializeToString())
    damaged = st.builds(
        damage, valid, st.integers(0, 10_000), st.binary(min_size=1, max_size=4), st.booleans()
    )
    return st.one_of(st.binary(max_size=200), damaged)


# --- the stack ------------------------------------------------------------------


@dataclass
class Stack:
    channels: dict[str, grpc.Channel]

    def call(self, service: str, method: MethodDescriptor, payload: Any, raw: bool) -> Any:
        channel = self.channels[service]
        path = f"/{method.containing_service.full_name}/{method.name}"
        serializer: Callable[[Any], bytes] | None = None if raw else _serialize
        response = message_class(method.output_type).FromString
        if method.server_streaming:
            stream = channel.unary_stream(path, serializer, response)
            return list(stream(payload, timeout=CALL_TIMEOUT_S))
        return channel.unary_unary(path, serializer, response)(payload, timeout=CALL_TIMEOUT_S)


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("fuzz")
    loop = BackgroundLoop()
    reranker, port = loop.run(_start_reranker(_reranker_settings(tmp)))
    services = BackgroundStack(tmp / "stack", embedder, reranker_addr=f"127.0.0.1:{port}")
    services.start()
    assert services.upsert(corpus_documents()).counts.rejected == 0
    addresses = {
        "indexer": services.indexer_addr,
        "retriever": services.retriever_addr,
        "reranker": f"127.0.0.1:{port}",
    }
    channels = {name: grpc.insecure_channel(address) for name, address in addresses.items()}
    try:
        yield Stack(channels)
    finally:
        for channel in channels.values():
            channel.close()
        services.stop()
        loop.run(reranker.stop())
        loop.close()


async def _start_reranker(settings: RerankerSettings) -> tuple[RerankerApp, int]:
    app = RerankerApp(settings)  # on the loop it serves from
    port = await app.open_port()
    assert await app.load_model()
    return app, port


def _reranker_settings(tmp: Path) -> RerankerSettings:
    return load_settings(
        RerankerSettings,
        host="127.0.0.1",
        reranker_port=0,
        rerank_model=str(build_tiny_cross_encoder(tmp / "tiny-cross-encoder")),
        rerank_cache_dir=tmp / "onnx",
        shutdown_grace_s=0.5,
    )


def status_of(stack: Stack, service: str, method: MethodDescriptor, payload: Any, raw: bool) -> Any:
    try:
        stack.call(service, method, payload, raw)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


METHODS = [
    pytest.param(service, method, id=f"{service}.{method.name}")
    for service, descriptor in SERVICES.items()
    for method in descriptor.methods
]


def _examples(method: MethodDescriptor) -> int:
    return EXAMPLES.get(method.name, DEFAULT_EXAMPLES)


@pytest.mark.parametrize(("service", "method"), METHODS)
def test_random_messages_are_never_internal_or_unknown(
    stack: Stack, service: str, method: MethodDescriptor
) -> None:
    @settings(FUZZ, max_examples=_examples(method))
    @given(request=requests(method.input_type))
    def check(request: Any) -> None:
        code, details = status_of(stack, service, method, request, raw=False)
        assert code in ALLOWED, f"{method.name}: {code.name} {details!r} for {request!r:.500}"

    check()


@pytest.mark.parametrize(("service", "method"), METHODS)
def test_random_bytes_are_never_internal_or_unknown(
    stack: Stack, service: str, method: MethodDescriptor
) -> None:
    @settings(FUZZ, max_examples=RAW_EXAMPLES)
    @given(payload=corrupted(method.input_type))
    def check(payload: bytes) -> None:
        code, details = status_of(stack, service, method, payload, raw=True)
        assert code in ALLOWED, f"{method.name}: {code.name} {details!r} for {payload!r:.500}"

    check()
