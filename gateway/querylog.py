"""What a log line may say about a user's query and identity.

Raw query text is personal data: it appears in logs only when the retention
setting is `raw` (the operator then owns how long logs are kept). Otherwise a
line carries the length and a keyed hash, which lets one instance's logs
correlate repeats without being reversible by a dictionary of likely queries
(the key is random per process and never leaves it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Literal

HASH_CHARS = 12


class QueryLogPolicy:
    def __init__(self, retention: Literal["none", "raw"]) -> None:
        self.retention = retention
        self._key = secrets.token_bytes(32)

    def _digest(self, text: str) -> str:
        mac = hmac.new(self._key, text.encode("utf-8"), hashlib.sha256)
        return mac.hexdigest()[:HASH_CHARS]

    def query_fields(self, query: str) -> dict[str, object]:
        fields: dict[str, object] = {"query_chars": len(query), "query_hash": self._digest(query)}
        if self.retention == "raw":
            fields["query"] = query
        return fields

    def client_fields(self, client: str) -> dict[str, object]:
        if self.retention == "raw":
            return {"client": client}
        return {"client_hash": self._digest(client)}
