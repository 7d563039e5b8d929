"""Shared helpers for tests: the test corpus, the background stack, model builders."""
