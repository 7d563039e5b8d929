"""Markup the Indexer normalises before chunking: HTML to Markdown,
Markdown reduced to what a reader sees, front matter."""
