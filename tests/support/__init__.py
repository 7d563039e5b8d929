"""Shared helpers for tests (model builders)."""
