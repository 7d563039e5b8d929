"""Which document encoders wrote an index's vectors, kept in the manifest
next to the model (services.indexer.app.check_embedding_model).

Encoders of the same weights (torch and ONNX fp32, ONNX int8) give comparable
vectors, so switching between them is allowed, unlike switching models; but
int8 vectors drift a little from fp32 ones (bench.load.document_encoder), so
an index records every encoder that has run on it while it held documents.
A switch then shows up as a mixed list in Stats rather than being hidden.
"""

from __future__ import annotations

import json

from services.core.deadline import Deadline
from services.core.logging import get_logger
from services.storage.base import unrequested_deadline
from services.storage.manifest import Manifest

log = get_logger(__name__)
DOCUMENT_ENCODERS_META = "document_encoders"


def recorded_document_encoders(manifest: Manifest, deadline: Deadline) -> list[str]:
    """The index's document encoders, the current one last ([] before any was recorded)."""
    raw = manifest.get_meta(DOCUMENT_ENCODERS_META, deadline)
    encoders = json.loads(raw or "[]")
    return [str(name) for name in encoders]


def record_document_encoder(manifest: Manifest, encoder: str) -> list[str]:
    """Record that `encoder` writes this index's vectors from now on, and
    return the list recorded. An Indexer may write as soon as it starts, so it
    counts from its start; an empty index keeps no earlier encoder's vectors."""
    recorded = recorded_document_encoders(manifest, unrequested_deadline())
    documents = manifest.count(unrequested_deadline())
    if not documents:
        encoders = [encoder]
    elif not recorded:
        # An index from before encoders were recorded: its encoder cannot be known.
        log.warning("document_encoder_adopted", encoder=encoder, documents=documents)
        encoders = [encoder]
    elif recorded[-1] == encoder:
        encoders = recorded
    else:
        # Once per switch: the next start with the same encoder finds it last.
        encoders = [*(name for name in recorded if name != encoder), encoder]
        log.warning(
            "document_encoder_changed",
            old=recorded[-1],
            new=encoder,
            encoders=encoders,
            documents=documents,
        )
    if encoders != recorded:
        manifest.set_meta(DOCUMENT_ENCODERS_META, json.dumps(encoders), unrequested_deadline())
    return encoders
