"""Who may call what, over which transport.

- `tls`: server and client TLS credentials (mutual TLS when the server asks
  for client certificates).
- `callers`: the callers file — named callers with roles, scopes and their
  credentials (token hashes, certificate names) — re-read when it changes.
- `server_auth`: the server interceptor that identifies each caller, checks
  the method's role and makes the caller available to servicers.
- `client`: channels to our own services with TLS and a bearer token.
- `exposure`: the start-up rule that refuses plaintext or unauthenticated
  serving on a non-loopback address unless explicitly allowed.
"""
