"""The one shape every server interceptor of ours has: ask for the method's
handler, let an unknown method through untouched (grpc then answers
UNIMPLEMENTED), and wrap the behaviours of a known one (`wrap`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc


class HandlerInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return handler
        return self.wrap(handler, handler_call_details)

    def wrap(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        """`handler` with its behaviours wrapped (or as it is)."""
        raise NotImplementedError
