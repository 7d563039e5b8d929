"""`python -m services.runtime.healthcheck HOST:PORT [SERVICE]`: exit 0 when the
gRPC server there reports SERVING for SERVICE ("" = the whole server), else 1.

For container health checks where no `grpc_health_probe` binary exists (the
docker-compose file and the Kubernetes exec probes use it). It runs beside
the server with the server's environment: when the server has TLS
(RAG_TLS_CERT_FILE), the check connects over TLS, trusts
RAG_TLS_CLIENT_CA_FILE (the internal CA), checks the name in the server's
own certificate and, for mutual TLS, presents that same certificate.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.runtime.security.client import ClientSecurity, sync_channel
from services.runtime.security.tls import ClientTls

TIMEOUT_S = 3.0


def own_server_security(env: Mapping[str, str]) -> ClientSecurity:
    """How to reach the server configured by `env` (RAG_TLS_*)."""
    cert, key = env.get("RAG_TLS_CERT_FILE"), env.get("RAG_TLS_KEY_FILE")
    if not cert or not key:
        return ClientSecurity()
    ca = env.get("RAG_TLS_CLIENT_CA_FILE")
    tls = ClientTls(
        ca_file=Path(ca) if ca else None,
        cert_file=Path(cert) if ca else None,
        key_file=Path(key) if ca else None,
        server_name=certificate_dns_name(Path(cert)),
    )
    return ClientSecurity(tls)


def certificate_dns_name(path: Path) -> str:
    """The first DNS name (else the common name) of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = san.value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return names[0] if names else str(common[0].value) if common else ""


def is_serving(
    address: str,
    service: str = "",
    timeout_s: float = TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> bool:
    with sync_channel(address, security or ClientSecurity()) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def wait_until_serving(
    address: str,
    service: str = "",
    timeout_s: float = 120.0,
    poll_s: float = 0.25,
    check_alive: Callable[[], None] | None = None,
) -> bool:
    """Poll until `address` reports SERVING (True) or `timeout_s` passes
    (False). `check_alive` may raise to stop early, e.g. when the process
    that should be serving has died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check_alive is not None:
            check_alive()
        if is_serving(address, service, timeout_s=min(2.0, max(deadline - time.monotonic(), 0.1))):
            return True
        time.sleep(poll_s)
    return False


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -m services.runtime.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    address, service = argv[0], argv[1] if len(argv) == 2 else ""
    return 0 if is_serving(address, service, security=own_server_security(os.environ)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
