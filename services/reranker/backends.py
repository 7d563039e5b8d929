"""The one small interface every scoring backend implements, and the torch one.

A backend turns a batch of (query, passage) pairs into raw logits. It may
honour a deadline *inside* a batch (ONNX Runtime can abandon a run between
operators) by raising `BatchInterrupted`; PyTorch cannot stop a forward pass,
so for it the scorer's planning before each batch is the only guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:  # the packaged ONNX reranker serves without torch
    from sentence_transformers import CrossEncoder


class BatchInterrupted(Exception):
    """The backend abandoned a batch because its deadline passed."""


class ScoringBackend(Protocol):
    name: str

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        """Raw model outputs for one batch, shape (n,) or (n, labels).
        `deadline` is a time.monotonic() value the backend may enforce."""
        ...


class TorchBackend:
    """The sentence-transformers CrossEncoder itself (PyTorch)."""

    name = "torch"

    def __init__(self, cross_encoder: CrossEncoder) -> None:
        import torch

        self._cross_encoder = cross_encoder
        self._identity = torch.nn.Identity()

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        raw = self._cross_encoder.predict(
            list(pairs),
            batch_size=len(pairs),
            activation_fn=self._identity,  # the scorer applies the configured activation
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(raw, dtype=np.float32)
