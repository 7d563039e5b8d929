"""Make a development PKI and caller tokens for deploy/docker-compose.yml:

    .venv/bin/python scripts/dev_secrets.py deploy/secrets

Writes ca.pem; a certificate and key per service, named by its compose
service name (indexer, retriever, reranker, gateway) plus one for the
command line (cli); a token per calling client (gateway, retriever, cli,
ops) in tokens/; and callers.toml, which holds only the tokens' SHA-256
hashes. For a single Docker host or a test cluster: in production, certificates
come from your PKI (e.g. cert-manager) and tokens from your secret store —
docs/security.md, "Issue and rotate credentials". Existing files are kept, so
re-running never invalidates what is deployed; delete the folder to start over.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
from pathlib import Path

import trustme

SERVICES = ("indexer", "retriever", "reranker", "gateway")
# Who calls what, with which role and scopes (every scope: one tenant here).
CALLERS = {
    "gateway": ("reader", "the public gateway: Retrieve and IndexStatus"),
    "retriever": ("reader", "the Retriever calling the Reranker"),
    "cli": ("writer", "ingestion pipelines: Upsert, Delete, Sync"),
    "ops": ("admin", "operators: Stats, Verify --repair, RecordRelease"),
}


def write_pki(out: Path) -> None:
    if (out / "ca.pem").exists():
        print(f"{out}/ca.pem exists: keeping the certificates")
        return
    ca = trustme.CA(organization_name="rag dev")
    ca.cert_pem.write_to_path(str(out / "ca.pem"))
    for name in (*SERVICES, "cli"):
        # The service name is what clients dial (retriever:50052); localhost
        # and 127.0.0.1 let grpcurl and the health check reach published ports.
        leaf = ca.issue_cert(name, "localhost", "127.0.0.1", common_name=name)
        leaf.private_key_pem.write_to_path(str(out / f"{name}.key"))
        (out / f"{name}.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))


def write_tokens(out: Path) -> None:
    tokens = out / "tokens"
    tokens.mkdir(exist_ok=True)
    lines = ["# Made by scripts/dev_secrets.py: token hashes only, never tokens.\n"]
    for name, (role, what) in CALLERS.items():
        path = tokens / f"{name}.token"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(32) + "\n")
        digest = hashlib.sha256(path.read_text().strip().encode()).hexdigest()
        lines.append(
            f'\n# {what}\n[[caller]]\nname = "{name}"\nroles = ["{role}"]\nscopes = ["*"]\n'
            f'token_sha256 = ["{digest}"]\n'
        )
    (out / "callers.toml").write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write (created if missing)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    write_pki(args.out)
    write_tokens(args.out)
    # Containers run as uid 10001: the files must be readable by it.
    for path in args.out.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    print(f"wrote {args.out}: ca.pem, <service>.pem/.key, tokens/*.token, callers.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
