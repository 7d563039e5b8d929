"""Peer systems measured side by side with the project. Each runs in the
benchmark environment (`make bench-env`) as a script, never imported here."""
