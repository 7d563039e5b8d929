"""`python -m services.retriever`: the Retriever alone (server mode; in
embedded mode use `python -m services.stack`, which shares the open stores)."""

from services.common.cpu import prefer_passive_waits

prefer_passive_waits()  # before torch is imported (see services.common.cpu)

from services.common.server import run_main  # noqa: E402
from services.stack.runtime import serve  # noqa: E402

if __name__ == "__main__":
    run_main(lambda: serve(indexer=False, retriever=True))
