"""The server side of caller identity: one interceptor for every service.

For each call it finds the caller — a bearer token in the `authorization`
metadata, else the verified client certificate's names — checks that the
caller holds the role the method needs, and makes the caller available to
the servicer (`current_caller()`), which enforces scopes on the request's
contents. Health checks are always open; reflection is open when enabled
(it is the API's shape, not data)."""

from __future__ import annotations

import contextvars
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from cryptography import x509
from cryptography.x509.oid import NameOID

from services.core.logging import get_logger
from services.runtime.interceptor import HandlerInterceptor
from services.runtime.security.caller_source import CallerSource
from services.runtime.security.callers import UNRESTRICTED, Caller, Role

log = get_logger(__name__)

OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
BEARER = "bearer "
# The verified peer certificate, as gRPC's auth context holds it.
_PEER_CERT_KEY = "x509_pem_cert"

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED

_current: contextvars.ContextVar[Caller] = contextvars.ContextVar("rag_caller")


def current_caller() -> Caller:
    """The caller of the RPC being served; unrestricted when auth is off."""
    return _current.get(UNRESTRICTED)


UnaryBehavior = Callable[..., Awaitable[Any]]
StreamBehavior = Callable[..., AsyncIterator[Any]]


class Denied(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class CallerAuthenticator:
    """Credential → Caller, and Caller × method → allowed or Denied."""

    def __init__(self, source: CallerSource, method_roles: Mapping[str, Role]) -> None:
        self.source = source
        self.method_roles = dict(method_roles)

    def identify(self, metadata: Mapping[str, str], cert_names: list[str]) -> Caller:
        registry = self.source.current()
        header = metadata.get("authorization", "")
        if header:
            if not header.lower().startswith(BEARER):
                raise Denied(
                    grpc.StatusCode.UNAUTHENTICATED, "authorization: expected 'Bearer <token>'"
                )
            caller = registry.by_token(header[len(BEARER) :].strip())
            if caller is None:
                raise Denied(
                    grpc.StatusCode.UNAUTHENTICATED, "authorization: unknown or revoked token"
                )
            return caller
        caller = registry.by_cert_names(cert_names) if cert_names else None
        if caller is None:
            raise Denied(
                UNAUTHENTICATED,
                "no credential: send metadata 'authorization: Bearer <token>'"
                + (f" (certificate {cert_names[0]!r} is not a known caller)" if cert_names else ""),
            )
        return caller

    def authorize(self, caller: Caller, method: str) -> None:
        # A method missing from the table is treated as the most privileged.
        needed = self.method_roles.get(method, Role.ADMIN)
        if not caller.has(needed):
            roles = ", ".join(sorted(caller.roles))
            raise Denied(
                grpc.StatusCode.PERMISSION_DENIED,
                f"caller {caller.name!r} (roles: {roles}) may not call {short_method(method)}: "
                f"it needs the {needed.value} role",
            )


def short_method(method: str) -> str:
    service, _, name = method.strip("/").rpartition("/")
    return f"{service.rsplit('.', 1)[-1]}/{name}"


def _metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    pairs = [(k, v) for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)]
    # Two credentials: a proxy or an audit log reading the first would see
    # another caller than the one a dict keeping the last acts as.
    if sum(1 for k, _ in pairs if k == "authorization") > 1:
        raise Denied(UNAUTHENTICATED, "authorization: sent more than once; send one credential")
    return dict(pairs)


def _cert_names(context: grpc.aio.ServicerContext) -> list[str]:
    pems = (context.auth_context() or {}).get(_PEER_CERT_KEY, [])
    return list(identity_names(pems[0])) if pems else []


@functools.lru_cache(maxsize=256)
def identity_names(pem: bytes) -> tuple[str, ...]:
    """The names a client certificate may be known by: its subject's common
    name and its DNS names. Not its other alternative names: gRPC lists URIs,
    e-mail addresses and IP addresses among them too, and a CA that signs an
    e-mail address `ops.rag.internal` for whoever asks must not make them
    the caller `ops.rag.internal`."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        common = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        alternative = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return tuple(common)
    except (ValueError, x509.DuplicateExtension):  # unreadable: no name, so no caller
        return ()
    return (*common, *alternative.value.get_values_for_type(x509.DNSName))


class AuthInterceptor(HandlerInterceptor):
    def __init__(self, authenticator: CallerAuthenticator) -> None:
        self.authenticator = authenticator

    def wrap(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method = details.method
        if method.startswith(OPEN_PREFIXES):
            return handler
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(method, handler.unary_unary))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._streaming(method, handler.unary_stream))
        raise NotImplementedError(f"{method}: client-streaming methods are not used here")

    async def _enter(self, method: str, context: grpc.aio.ServicerContext) -> None:
        """Identify and authorize, or end the call. Each RPC runs in its own
        task (its own context copy), so the caller set here is never reset."""
        try:
            caller = self.authenticator.identify(_metadata(context), _cert_names(context))
            self.authenticator.authorize(caller, method)
        except Denied as exc:
            log.warning(
                "call_refused", method=short_method(method), code=exc.code.name, reason=str(exc)
            )
            await context.abort(exc.code, str(exc))
        _current.set(caller)

    def _unary(
        self, method: str, behavior: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await self._enter(method, context)
            return await behavior(request, context)

        return guarded

    def _streaming(
        self, method: str, behavior: Callable[..., AsyncIterator[Any]]
    ) -> Callable[..., AsyncIterator[Any]]:
        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await self._enter(method, context)
            async for item in behavior(request, context):
                yield item

        return guarded
