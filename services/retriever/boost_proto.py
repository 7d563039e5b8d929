"""Boosts from the Retrieve proto (the servicer's adapter), each bound
checked by services.retriever.boosts.check_boosts. Keys and values are
one-line text (services.core.field_rules; a value may break lines as the
metadata values it is compared with may), `origin` is RFC 3339, and every
number of a recency boost is finite even when its weight 0 turns it off."""

from __future__ import annotations

import math
from datetime import datetime

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.errors import InvalidArgument
from services.core.field_rules import (
    MAX_METADATA_VALUE_CHARS,
    hidden_character_problem,
    parse_rfc3339,
)
from services.retriever.boosts import Boosts, DecayFunction, MetadataBoost, RecencyBoost

MAX_KEY_CHARS, MAX_VALUE_CHARS = 128, MAX_METADATA_VALUE_CHARS
_FUNCTIONS = {
    pb.DECAY_FUNCTION_UNSPECIFIED: DecayFunction.EXP,
    pb.DECAY_FUNCTION_EXP: DecayFunction.EXP,
    pb.DECAY_FUNCTION_GAUSS: DecayFunction.GAUSS,
    pb.DECAY_FUNCTION_LINEAR: DecayFunction.LINEAR,
}


def boosts_from_proto(msg: pb.Boosts) -> Boosts:
    metadata = tuple(
        MetadataBoost(
            _text(f"boosts.metadata[{i}].key", b.key, MAX_KEY_CHARS, line_breaks=False),
            _text(f"boosts.metadata[{i}].value", b.value, MAX_VALUE_CHARS, line_breaks=True),
            b.weight,
        )
        for i, b in enumerate(msg.metadata)
    )
    if msg.HasField("recency"):
        _check_finite(msg.recency)
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
    origin = parse_rfc3339(text)  # not fromisoformat alone: it ignores a trailing NUL
    if origin is None:
        raise InvalidArgument(
            f"boosts.recency.origin: {text!r} is not an RFC 3339 time with a zone offset"
        )
    return origin


def _check_finite(msg: pb.RecencyBoost) -> None:
    for name in ("weight", "scale_days", "offset_days", "decay"):
        value = getattr(msg, name)
        if not math.isfinite(value):
            raise InvalidArgument(f"boosts.recency.{name}: {value} is not a finite number")


def _text(field: str, value: str, limit: int, line_breaks: bool) -> str:
    _bounded(field, value, limit)
    problem = hidden_character_problem(value, line_breaks=line_breaks)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")
    return value


def _bounded(field: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise InvalidArgument(f"{field}: {len(value)} characters, limit is {limit}")
    return value
