"""Which OTEL_* settings turn tracing on, and which are refused."""

from __future__ import annotations

import pytest

from services.core.errors import ConfigError
from services.runtime.observability.tracing import Tracing, exporters_from_env

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ("otlp", "console")),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
    ],
)
def test_tracing_is_off_unless_asked_for(environ: dict[str, str], exporters: tuple[str]) -> None:
    assert exporters_from_env(environ) == exporters


def test_an_unknown_exporter_is_named() -> None:
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER: 'jaeger'"):
        exporters_from_env({"OTEL_TRACES_EXPORTER": "jaeger"})


def test_an_unknown_protocol_is_named() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        Tracing.from_env("rag-test", environ)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_over_either_protocol(protocol: str) -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
    }
    tracing = Tracing.from_env("rag-test", environ)
    assert tracing.enabled
    assert tracing.provider is not None
    assert tracing.provider.resource.attributes["service.name"] == "rag-test"
    tracing.shutdown()
