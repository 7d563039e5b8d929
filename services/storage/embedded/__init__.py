"""The single-machine backends: Qdrant Edge, tantivy, the SQLite manifest."""
