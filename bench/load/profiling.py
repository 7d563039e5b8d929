"""Sample a running service with py-spy (installed in the benchmark
environment) and summarise where its time goes."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT

PY_SPY = ROOT / ".venv-bench" / "bin" / "py-spy"
TOP_FRAMES = 18


class Sampler:
    """`py-spy record` attached to `pid` for `seconds`, raw (collapsed) output."""

    def __init__(self, pid: int, seconds: float, output: Path, rate_hz: int = 250) -> None:
        self.pid, self.seconds, self.output, self.rate_hz = pid, seconds, output, rate_hz
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> str:
        """Empty when py-spy can run, else why not."""
        return "" if PY_SPY.is_file() else f"py-spy not installed ({PY_SPY}): make bench-env"

    def start(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                str(PY_SPY),
                "record",
                "--pid",
                str(self.pid),
                "--duration",
                str(int(self.seconds)),
                "--rate",
                str(self.rate_hz),
                "--format",
                "raw",
                "--output",
                str(self.output),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def finish(self) -> dict[str, Any]:
        assert self.proc is not None
        _, stderr = self.proc.communicate(timeout=self.seconds + 60)
        if self.proc.returncode != 0 or not self.output.is_file():
            reason = stderr.decode(errors="replace").strip()[-500:]
            return {"not_measured": f"py-spy failed: {reason}"}
        return summarise(self.output.read_text(), self.seconds)


# Where a sample's time goes: the first category whose marker occurs in its
# stack (innermost-first markers come first), so the shares add up to 1.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("query embedding: tokenizer", ("_encode_plus", "tokenization_utils")),
    ("query embedding: model forward", ("BaseModel.forward",)),
    # The calling thread, sampled for the whole ONNX Runtime call (feeds, the
    # run, pooling); ORT's own compute threads are native and not sampled.
    ("query embedding: ONNX Runtime", ("OnnxTextEncoder.encode", "E5OnnxEncoder.encode")),
    ("query embedding: sentence-transformers around it", ("SentenceTransformer.encode",)),
    ("vector search (Qdrant Edge)", ("EdgeVectorStore.search",)),
    ("BM25 search (tantivy)", ("TantivyLexicalStore.search",)),
    # The second phase of the two-phase fetch (services.retriever.hit_rows).
    ("whole rows for the kept hits", ("HitRows.",)),
    ("highlights", ("with_highlights",)),
    # Around the model: batching, and followers of a shared forward pass
    # waiting for its leader (services.embedding.query_batching).
    ("query embedding: batching, waiting for a shared pass", ("QueryBatcher.embed",)),
    ("fusion, per-document cap, evidence", ("retriever/fusion.py", "retriever/evidence.py")),
    ("servicer: proto conversion", ("retriever/servicer.py",)),
    ("event loop waiting for I/O", ("EpollSelector.select",)),
    ("event loop and gRPC, other", ("asyncio/", "grpc")),
    ("idle worker threads", ("_worker (concurrent/futures/thread.py",)),
)


def summarise(collapsed: str, seconds: float) -> dict[str, Any]:
    """Exclusive shares per category, and inclusive shares of the top frames."""
    inclusive: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        categories[_category(stack)] += count
        for frame in {_frame_name(f) for f in stack.split(";")[1:]}:  # [0] is the thread
            inclusive[frame] += count
    total = max(total, 1)
    return {
        "samples": total,
        "seconds": seconds,
        "breakdown": [
            {"category": name, "share": round(n / total, 3)} for name, n in categories.most_common()
        ],
        "top": [
            {"frame": frame, "share": round(n / total, 3)}
            for frame, n in inclusive.most_common(TOP_FRAMES)
        ],
    }


def _category(stack: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in stack for marker in markers):
            return name
    return "other"


def _frame_name(frame: str) -> str:
    """`encode (sentence_transformers/SentenceTransformer.py:123)` → without the line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", f"{ROOT}/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})" if path else name
