"""The PostgreSQL backend: pgvector, BM25 in SQL, the manifest, one
transaction per run."""
