"""`python -m services.stack`: the embedded stack — Indexer and Retriever in
one process on their own ports (embedded stores allow a single writer)."""

from services.common.server import run_main
from services.stack.runtime import serve

if __name__ == "__main__":
    run_main(lambda: serve(indexer=True, retriever=True))
