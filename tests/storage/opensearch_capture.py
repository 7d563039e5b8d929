"""REQUEST-CAPTURE DOUBLE for an OpenSearch cluster (test-only).

`CaptureConnection` replaces opensearch-py's HTTP connection class, the
lowest layer of the real client: everything above it (API methods, parameter
handling, JSON/NDJSON serialization, the transport) is the real library. It
records each request as it would go on the wire (method, path, query
parameters, decoded body, timeout) and answers from a script of canned
responses, so tests pin exact request bodies and inject per-item bulk
failures or connection errors. It implements no search.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import Connection
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError

from services.storage.settings import StoreSettings

Answer = tuple[int, Any] | Exception
Responder = Callable[["CapturedRequest"], Answer]


@dataclass(frozen=True)
class CapturedRequest:
    method: str
    path: str
    params: dict[str, str]
    body: Any  # dict for JSON, list of dicts for NDJSON, None when empty
    timeout: float | None


@dataclass
class OpenSearchCapture:
    """Canned answers per (method, path); a queue is consumed one per call,
    its last answer repeating. Unscripted requests get 200 with an empty
    search result or {"acknowledged": true}."""

    script: dict[tuple[str, str], deque[Answer] | Responder] = field(default_factory=dict)
    requests: list[CapturedRequest] = field(default_factory=list)
    closed: bool = False

    def on(self, method: str, path: str, *answers: Answer) -> None:
        self.script[(method, path)] = deque(answers)

    def on_call(self, method: str, path: str, responder: Responder) -> None:
        self.script[(method, path)] = responder

    def bodies(self, method: str, path: str) -> list[Any]:
        return [r.body for r in self.requests if (r.method, r.path) == (method, path)]

    def answer(self, request: CapturedRequest) -> Answer:
        self.requests.append(request)
        scripted = self.script.get((request.method, request.path))
        if scripted is None:
            return 200, _default_answer(request.path)
        if callable(scripted):
            return scripted(request)
        return scripted.popleft() if len(scripted) > 1 else scripted[0]


class CaptureConnection(Connection):
    def __init__(self, *, capture: OpenSearchCapture, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capture = capture
        self.options = kwargs  # what the client asked the connection for (auth, TLS)

    def perform_request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: Any = None,
        body: Any = None,
        timeout: float | None = None,
        ignore: Any = (),
        headers: Any = None,
    ) -> tuple[int, dict[str, str], str]:
        query = {
            k: v.decode() if isinstance(v, bytes) else str(v) for k, v in (params or {}).items()
        }
        request = CapturedRequest(method, url, query, _decode(body), timeout)
        answer = self.capture.answer(request)
        if isinstance(answer, Exception):
            raise answer
        status, payload = answer
        raw = json.dumps(payload)
        if not (200 <= status < 300) and status not in (ignore or ()):
            self._raise_error(status, raw, "application/json")
        return status, {"content-type": "application/json"}, raw

    def close(self) -> None:
        self.capture.closed = True


def _default_answer(path: str) -> dict[str, Any]:
    if path.endswith("/_search"):
        return {"hits": {"hits": []}}
    return {"acknowledged": True}


def _decode(body: Any) -> Any:
    if body is None:
        return None
    text = body.decode("utf-8") if isinstance(body, bytes) else str(body)
    lines = [line for line in text.split("\n") if line]
    if len(lines) > 1 or text.endswith("\n"):
        return [json.loads(line) for line in lines]  # NDJSON (bulk)
    return json.loads(text)


def capture_settings(**extra: Any) -> StoreSettings:
    return StoreSettings(
        QDRANT_URL="http://qdrant.test:6333",
        OPENSEARCH_URL="https://opensearch.test:9200",
        OPENSEARCH_USER="rag",
        OPENSEARCH_PASSWORD="secret",
        OPENSEARCH_TIMEOUT_S=2.5,
        **extra,
    )


def connection_refused() -> Exception:
    return OpenSearchConnectionError("N/A", "connection refused (injected)", None)


def bulk_ok(body: list[dict[str, Any]], status: int = 200) -> dict[str, Any]:
    """A bulk answer with `status` for every action line of `body`."""
    items = []
    for line in body:
        op = next(iter(line))
        if op in ("index", "create", "update", "delete"):
            items.append({op: {"_id": line[op]["_id"], "status": status}})
    return {"errors": status >= 300, "items": items}
