"""What a server needs to know to run securely, built from its settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from services.core.errors import ConfigError
from services.runtime.security.caller_source import CallerSource
from services.runtime.security.callers import Role
from services.runtime.security.exposure import check_exposure
from services.runtime.security.server_auth import AuthInterceptor, CallerAuthenticator
from services.runtime.security.tls import ServerTls


@dataclass(frozen=True)
class ServerSecurity:
    tls: ServerTls | None = None
    callers: CallerSource | None = None  # None: no caller identity (loopback only)
    reflection: bool = True

    @classmethod
    def from_settings(cls, settings: Any) -> ServerSecurity:
        """From BaseServiceSettings' tls_*, auth_* and grpc_reflection fields."""
        tls = None
        if settings.tls_cert_file:
            tls = ServerTls(
                settings.tls_cert_file,
                settings.tls_key_file,
                settings.tls_client_ca_file,
                settings.tls_require_client_cert,
            )
        security = cls(tls, _callers(settings), settings.grpc_reflection)
        check_exposure(
            settings.host,
            tls=tls is not None,
            auth=security.callers is not None,
            allow_insecure=settings.allow_insecure,
        )
        return security

    def credentials(self) -> grpc.ServerCredentials | None:
        return self.tls.credentials() if self.tls else None

    def interceptors(self, method_roles: Mapping[str, Role]) -> list[grpc.aio.ServerInterceptor]:
        if self.callers is None:
            return []
        return [AuthInterceptor(CallerAuthenticator(self.callers, method_roles))]


def _callers(settings: Any) -> CallerSource | None:
    path, inline = settings.auth_callers_file, settings.auth_callers
    if path and inline:
        raise ConfigError("set one of RAG_AUTH_CALLERS_FILE and RAG_AUTH_CALLERS, not both")
    if path:
        return CallerSource.from_file(path)
    if inline:
        return CallerSource.from_text(inline.get_secret_value(), "RAG_AUTH_CALLERS")
    return None
