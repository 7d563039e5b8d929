"""`python -m services.retriever`: the Retriever alone (server mode; in
embedded mode use `python -m services.stack`, which shares the open stores)."""

from services.common.server import run_main
from services.stack.runtime import serve

if __name__ == "__main__":
    run_main(lambda: serve(indexer=False, retriever=True))
