"""Store adapters behind the `VectorStore` / `LexicalStore` protocols (`base`).

Embedded: `qdrant_edge.EdgeVectorStore` and `tantivy_store.TantivyLexicalStore`
(opened together by `embedded.open_embedded_stores`). Encodings every adapter
shares (payload layout, metadata terms) live in `payload`.

Kept import-free on purpose: importing the protocols must not load the native
store libraries.
"""
