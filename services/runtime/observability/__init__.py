"""Metrics, traces and log context for every service (docs/operations.md).

- `metrics_listener`: a Prometheus registry served on a listener of its own.
- `rpc_observer`: one gRPC server interceptor that counts, times and traces
  every call and binds its request id to the logs.
- `tracing`: OpenTelemetry, configured by the standard OTEL_* variables and
  off unless they ask for it.
- `propagation`: W3C trace context and the request id carried in gRPC
  metadata from one service to the next.
"""
