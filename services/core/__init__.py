"""The domain: documents and chunks (`models`), the error tree, `Deadline`,
lexical analysis, the embedding models and their runtimes, the query text
rules. Imports nothing from the rest of `services`."""
