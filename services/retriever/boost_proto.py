"""Boosts from the Retrieve proto (the servicer's adapter), each bound
checked by services.retriever.boosts.check_boosts."""

from __future__ import annotations

from datetime import datetime

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.errors import InvalidArgument
from services.retriever.boosts import Boosts, DecayFunction, MetadataBoost, RecencyBoost

MAX_KEY_CHARS, MAX_VALUE_CHARS = 128, 2048
_FUNCTIONS = {
    pb.DECAY_FUNCTION_UNSPECIFIED: DecayFunction.EXP,
    pb.DECAY_FUNCTION_EXP: DecayFunction.EXP,
    pb.DECAY_FUNCTION_GAUSS: DecayFunction.GAUSS,
    pb.DECAY_FUNCTION_LINEAR: DecayFunction.LINEAR,
}


def boosts_from_proto(msg: pb.Boosts) -> Boosts:
    metadata = tuple(
        MetadataBoost(
            _bounded(f"boosts.metadata[{i}].key", b.key, MAX_KEY_CHARS),
            _bounded(f"boosts.metadata[{i}].value", b.value, MAX_VALUE_CHARS),
            b.weight,
        )
        for i, b in enumerate(msg.metadata)
    )
    recency = _recency(msg.recency) if msg.HasField("recency") and msg.recency.weight else None
    return Boosts(recency, metadata)


def _recency(msg: pb.RecencyBoost) -> RecencyBoost:
    if msg.function not in _FUNCTIONS:
        raise InvalidArgument(f"boosts.recency.function: unknown value {msg.function}")
    return RecencyBoost(
        weight=msg.weight,
        scale_days=msg.scale_days,
        offset_days=msg.offset_days,
        decay=msg.decay or 0.5,
        function=_FUNCTIONS[msg.function],
        origin=_origin(msg.origin),
    )


def _origin(text: str) -> datetime | None:
    if not text:
        return None
    _bounded("boosts.recency.origin", text, 64)
    try:
        origin = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        origin = None
    if origin is None or origin.tzinfo is None:
        raise InvalidArgument(
            f"boosts.recency.origin: {text!r} is not an RFC 3339 time with a zone offset"
        )
    return origin


def _bounded(field: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise InvalidArgument(f"{field}: {len(value)} characters, limit is {limit}")
    return value
