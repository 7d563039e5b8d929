"""`python -m services.indexer`: the Indexer alone (server mode, or embedded
when no Retriever process shares the data folder)."""

from services.common.cpu import prefer_passive_waits

prefer_passive_waits()  # before torch is imported (see services.common.cpu)

from services.common.server import run_main  # noqa: E402
from services.stack.runtime import serve  # noqa: E402

if __name__ == "__main__":
    run_main(lambda: serve(indexer=True, retriever=False))
