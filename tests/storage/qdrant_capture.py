"""REQUEST-CAPTURE DOUBLE for a Qdrant server (test-only, not a Qdrant).

A real gRPC server on a free local port that implements the Qdrant
`Collections` and `Points` services just far enough to answer the calls our
adapter makes. It records every request as it arrived on the wire (the
protobuf message as a dict, the call metadata, the deadline), so tests pin what
the real `qdrant-client` sends, and it can fail chosen calls with a status
code to inject faults. Search results are whatever the test scripts; it
implements no storage or ranking.
"""

from __future__ import annotations

from collections import defaultdict, deque
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from qdrant_client import grpc as qg
from qdrant_client import models
from qdrant_client.conversions.conversion import RestToGrpc
from qdrant_client.grpc import collections_service_pb2_grpc, points_service_pb2_grpc

from services.core.models import Chunk

# Sample data the request tests pin.
ALL_INDEXED = ("scope_id", "locale", "doc_id", "url", "meta", "generation")
# Payload indexes that are not keyword indexes (what the server reports them as).
INDEX_TYPES = {"generation": models.PayloadSchemaType.INTEGER}
DIM = 4
SETUP_0 = "95d95013-3170-57a1-bcab-8de8ee983296"  # point_uuid("chunk-setup-0")
SETUP_1 = "b55d03d8-62c8-5dca-b401-9e02c5aa7258"  # point_uuid("chunk-setup-1")
FAQ_0 = "f032e1ef-62ee-5607-9ecf-79dc6dd85a77"  # point_uuid("chunk-faq-0")


def chunk(chunk_id: str, position: int = 0, **fields: Any) -> Chunk:
    values: dict[str, Any] = {
        "doc_id": "guide/setup",
        "text": "Ports: the gateway listens on 8080.",
        "content_hash": "b733a12a",
        "url": "https://docs.test/setup",
        "title": "Setup",
        "heading_path": "Guide > Setup > Ports",
        "scope_id": "docs",
        "locale": "en",
        "metadata": {"product": "api"},
    }
    values.update(fields)
    return Chunk(chunk_id=chunk_id, position=position, **values)


@dataclass(frozen=True)
class CapturedCall:
    method: str
    request: dict[str, Any]
    metadata: dict[str, str]
    deadline_s: float | None


def rest_collection_info(
    size: int, distance: models.Distance, indexed: tuple[str, ...] = ()
) -> models.CollectionInfo:
    """What the server reports about a collection (REST model)."""
    return models.CollectionInfo(
        status=models.CollectionStatus.GREEN,
        optimizer_status=models.OptimizersStatusOneOf.OK,
        segments_count=1,
        payload_schema={
            name: models.PayloadIndexInfo(
                data_type=INDEX_TYPES.get(name, models.PayloadSchemaType.KEYWORD), points=0
            )
            for name in indexed
        },
        config=models.CollectionConfig(
            params=models.CollectionParams(
                vectors=models.VectorParams(size=size, distance=distance)
            ),
            hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
            optimizer_config=models.OptimizersConfig(
                deleted_threshold=0.2,
                vacuum_min_vector_number=1000,
                default_segment_number=0,
                flush_interval_sec=5,
            ),
            wal_config=models.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
        ),
    )


def collection_info(
    size: int, distance: models.Distance, indexed: tuple[str, ...] = ()
) -> qg.CollectionInfo:
    """The same as a gRPC message."""
    return RestToGrpc.convert_collection_info(rest_collection_info(size, distance, indexed))


def _done() -> qg.PointsOperationResponse:
    return qg.PointsOperationResponse(
        result=qg.UpdateResult(operation_id=1, status=qg.UpdateStatus.Completed)
    )


@dataclass
class QdrantCapture:
    """What the double answers; tests change these fields before acting."""

    exists: bool = False
    info: qg.CollectionInfo = field(
        default_factory=lambda: collection_info(8, models.Distance.COSINE)
    )
    stored_points: list[qg.RetrievedPoint] = field(default_factory=list)
    scored_points: list[qg.ScoredPoint] = field(default_factory=list)
    count: int = 0
    # Scroll answers, one page per call: the points and the next page's id
    # (None on the last page); consumed in order.
    scroll_pages: deque[tuple[list[qg.RetrievedPoint], qg.PointId | None]] = field(
        default_factory=deque
    )
    # method -> status codes to fail the next calls with, in order
    failures: dict[str, deque[grpc.StatusCode]] = field(default_factory=lambda: defaultdict(deque))
    calls: list[CapturedCall] = field(default_factory=list)

    def fail_next(self, method: str, *codes: grpc.StatusCode) -> None:
        self.failures[method].extend(codes)

    def methods(self) -> list[str]:
        return [call.method for call in self.calls]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [call.request for call in self.calls if call.method == method]

    def record(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        self.calls.append(
            CapturedCall(
                method=method,
                request=MessageToDict(request, preserving_proto_field_name=True),
                metadata={k: str(v) for k, v in context.invocation_metadata()},
                deadline_s=context.time_remaining(),
            )
        )
        pending = self.failures.get(method)
        if pending:
            context.abort(pending.popleft(), f"injected failure of {method}")

    def answer(self, method: str) -> Any:
        answers = {
            "CollectionExists": lambda: qg.CollectionExistsResponse(
                result=qg.CollectionExists(exists=self.exists)
            ),
            "Create": lambda: qg.CollectionOperationResponse(result=True),
            "GetCollection": lambda: qg.GetCollectionInfoResponse(result=self.info),
            "CreateFieldIndex": _done,
            "Upsert": _done,
            "UpdateBatch": lambda: qg.UpdateBatchResponse(
                result=[qg.UpdateResult(operation_id=1, status=qg.UpdateStatus.Completed)]
            ),
            "Delete": _done,
            "Query": lambda: qg.QueryResponse(result=self.scored_points),
            "GetPoints": lambda: qg.GetResponse(result=self.stored_points),
            "Count": lambda: qg.CountResponse(result=qg.CountResult(count=self.count)),
            "Scroll": self._scroll_page,
        }
        return answers[method]()

    def _scroll_page(self) -> qg.ScrollResponse:
        points, next_page = self.scroll_pages.popleft()
        return qg.ScrollResponse(result=points, next_page_offset=next_page)


class _Recorded:
    """A servicer whose calls the capture records and answers."""

    def __init__(self, capture: QdrantCapture) -> None:
        self.capture = capture

    def _handle(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        self.capture.record(method, request, context)
        return self.capture.answer(method)


class _Collections(_Recorded, collections_service_pb2_grpc.CollectionsServicer):
    def CollectionExists(self, request, context):
        return self._handle("CollectionExists", request, context)

    def Create(self, request, context):
        return self._handle("Create", request, context)

    def Get(self, request, context):
        return self._handle("GetCollection", request, context)


class _Points(_Recorded, points_service_pb2_grpc.PointsServicer):
    def CreateFieldIndex(self, request, context):
        return self._handle("CreateFieldIndex", request, context)

    def Upsert(self, request, context):
        return self._handle("Upsert", request, context)

    def UpdateBatch(self, request, context):
        return self._handle("UpdateBatch", request, context)

    def Delete(self, request, context):
        return self._handle("Delete", request, context)

    def Query(self, request, context):
        return self._handle("Query", request, context)

    def QueryBatch(self, request, context):
        self.capture.record("QueryBatch", request, context)
        one = qg.BatchResult(result=self.capture.scored_points)
        return qg.QueryBatchResponse(result=[one for _ in request.query_points])

    def Get(self, request, context):
        return self._handle("GetPoints", request, context)

    def Count(self, request, context):
        return self._handle("Count", request, context)

    def Scroll(self, request, context):
        return self._handle("Scroll", request, context)


def start_capture_server(capture: QdrantCapture) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    collections_service_pb2_grpc.add_CollectionsServicer_to_server(_Collections(capture), server)
    points_service_pb2_grpc.add_PointsServicer_to_server(_Points(capture), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port
