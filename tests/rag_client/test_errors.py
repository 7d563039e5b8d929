"""Every status code a call can end with becomes one exception class of the
tree, carrying the code, the server's details, the method and the attempts;
through the wire, from the fake server that injects the codes."""

from __future__ import annotations

import grpc
import pytest

from rag_client import (
    Aborted,
    CallError,
    ClientSettings,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidRequest,
    NotFound,
    OtherCallError,
    PermissionDenied,
    RagClientError,
    ResourceExhausted,
    RetrieverClient,
    RetryPolicy,
    Unauthenticated,
    Unavailable,
)
from rag_client.errors import error_for
from tests.rag_client.fault_server import OVERSIZED_BYTES, Faults, fail

pytestmark = pytest.mark.unit

Code = grpc.StatusCode
EXPECTED: list[tuple[grpc.StatusCode, type[CallError]]] = [
    (Code.INVALID_ARGUMENT, InvalidRequest),
    (Code.UNAUTHENTICATED, Unauthenticated),
    (Code.PERMISSION_DENIED, PermissionDenied),
    (Code.NOT_FOUND, NotFound),
    (Code.RESOURCE_EXHAUSTED, ResourceExhausted),
    (Code.DEADLINE_EXCEEDED, DeadlineExceeded),
    (Code.FAILED_PRECONDITION, FailedPrecondition),
    (Code.ABORTED, Aborted),
    (Code.UNAVAILABLE, Unavailable),
    (Code.INTERNAL, OtherCallError),
    (Code.UNIMPLEMENTED, OtherCallError),
    (Code.UNKNOWN, OtherCallError),
]


@pytest.mark.parametrize(("code", "kind"), EXPECTED)
def test_each_code_raised_by_the_server_maps_to_its_class(
    faults: Faults, target: str, code: grpc.StatusCode, kind: type[CallError]
) -> None:
    faults.reset(fail(code, f"server says {code.name}"))
    settings = ClientSettings(target, retry=RetryPolicy(max_attempts=1))
    with RetrieverClient(settings) as client, pytest.raises(kind) as err:
        client.retrieve("q")
    error = err.value
    assert type(error) is kind and isinstance(error, CallError | RagClientError)
    assert error.code == code and error.details == f"server says {code.name}"
    assert error.method == "Retriever/Retrieve" and error.attempts == 1
    assert str(error) == f"Retriever/Retrieve: {code.name}: server says {code.name}"
    assert isinstance(error.__cause__, grpc.RpcError)  # the original, for debugging


@pytest.mark.parametrize(
    ("details", "field"),
    [
        ("top_k: 51 is outside 1..50", "top_k"),
        ("filter.doc_ids: 1001 ids, at most 1000", "filter.doc_ids"),
        ("query: has no letter, digit or symbol (only punctuation)", "query"),
        ("the index is gone", ""),  # no field named: nothing guessed
    ],
)
def test_invalid_request_names_the_field_the_server_named(details: str, field: str) -> None:
    error = error_for(Code.INVALID_ARGUMENT, details)
    assert isinstance(error, InvalidRequest)
    assert error.field == field and error.details == details


def test_an_answer_the_services_may_send_is_received_whole(faults: Faults, target: str) -> None:
    # Probe: gRPC's default 4 MiB receive limit refused a 7 MB answer the
    # Retriever sent (it sends up to 16 MiB) as RESOURCE_EXHAUSTED ("back off").
    faults.reset()
    with RetrieverClient(ClientSettings(target)) as client:
        answer = client.retrieve("oversized")
    assert len(answer.hits[0].text) == OVERSIZED_BYTES
