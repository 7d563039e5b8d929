"""`python -m services.stack`: the embedded stack — Indexer and Retriever in
one process on their own ports (embedded stores allow a single writer)."""

from services.common.cpu import prefer_passive_waits

prefer_passive_waits()  # before torch is imported (see services.common.cpu)

from services.common.server import run_main  # noqa: E402
from services.stack.runtime import serve  # noqa: E402

if __name__ == "__main__":
    run_main(lambda: serve(indexer=True, retriever=True))
