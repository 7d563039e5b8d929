"""Late interaction (ColBERT MaxSim) as a reranking backend, on the packaged
answerai-colbert-small-v1 encoder (services.embedding.packaged_files.COLBERT).

A cross-encoder reads the question and the passage together; ColBERT encodes
them apart, one vector per token, and scores a pair by the sum over the
question's tokens of each one's best cosine with a passage token (MaxSim).
The Reranker's contract is unchanged: a batch of (question, passage) pairs in,
one score per pair out, so its deadline-aware batching serves this backend as
it serves the cross-encoder. Each distinct question of a batch is encoded once.

The wheel ships the encoder without ColBERT's projection layer: its output is
the 384-wide token states, used whole and L2-normalised (the form measured best:
bench/results/notes/late_interaction.md). The scores are sums of cosines, not logits:
their scale is the question's token count, so the Retriever's blend and gate
for this model are fitted on its own scores (services.retriever.fusion).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from services.reranker.onnx_backend import run_by_deadline
from services.reranker.packaged_backend import PackagedOnnxModel

# ColBERT encodes a question at up to 32 tokens (its training length).
QUESTION_TOKENS = 32


class PackagedColbertBackend(PackagedOnnxModel):
    """`folder`: a verified packaged ColBERT folder (model.onnx, tokenizer.json);
    passages are cut at `max_length` tokens."""

    def __init__(self, folder: Path, max_length: int, threads: int = 0, spin: bool = False):
        super().__init__(folder, max_length, threads, spin)
        self._tokenizer.enable_truncation(max_length)
        # Its own tokenizer for questions: no truncation setting changes between calls.
        self._question_tokenizer = copy.deepcopy(self._tokenizer)
        self._question_tokenizer.enable_truncation(QUESTION_TOKENS)

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        """MaxSim of each pair, shape (n,)."""
        questions = list(dict.fromkeys(question for question, _ in pairs))
        encoded = self._encode(self._question_tokenizer, questions, deadline)
        asked = dict(zip(questions, encoded, strict=True))
        passages = self._encode(self._tokenizer, [passage for _, passage in pairs], deadline)
        scores = [
            float((asked[question] @ tokens.T).max(axis=1).sum())
            for (question, _), tokens in zip(pairs, passages, strict=True)
        ]
        return np.asarray(scores, dtype=np.float32)

    def _encode(
        self, tokenizer: Tokenizer, texts: list[str], deadline: float | None
    ) -> list[np.ndarray]:
        """Each text's token vectors (padding dropped), L2-normalised."""
        encoded = tokenizer.encode_batch(texts)
        feeds = self._feeds_of(encoded)
        states = run_by_deadline(self._session, self._output, feeds, deadline)
        vectors = []
        for row, e in enumerate(encoded):
            tokens = states[row, : sum(e.attention_mask)]
            vectors.append(tokens / np.linalg.norm(tokens, axis=1, keepdims=True).clip(1e-9))
        return vectors
