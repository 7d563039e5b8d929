"""`python -m services.indexer`: the Indexer alone (server mode, or embedded
when no Retriever process shares the data folder)."""

from services.common.server import run_main
from services.stack.runtime import serve

if __name__ == "__main__":
    run_main(lambda: serve(indexer=True, retriever=False))
