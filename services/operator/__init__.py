"""Operator tooling: the Indexer CLI (`python -m services.operator.cli`:
ingest, delete, stats, verify, release-check), the release check, its record
and golden queries. Talks to the services over gRPC; may import
`services.indexer`, which never imports it."""
