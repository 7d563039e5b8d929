"""What a service process needs: settings, the gRPC server and the one
start-up recipe (settings -> parts -> apps -> server), observability,
security, health checks, request decoding. Imports `services.core`,
`services.storage` and `services.contract`, never a service."""
