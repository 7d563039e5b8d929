"""Reading folders, sites and JSON lines into documents: the client side of
an ingest (operator CLI, benchmarks). The Indexer server never imports it."""
