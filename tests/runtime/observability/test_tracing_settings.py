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


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_SAMPLER": "bogus"}, "OTEL_TRACES_SAMPLER: 'bogus'"),
        (
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "nan"},
            "OTEL_TRACES_SAMPLER_ARG: 'nan'",
        ),
        (
            {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
            "OTEL_TRACES_SAMPLER_ARG: '2'",
        ),
    ],
)
def test_a_sampler_the_sdk_would_replace_with_always_on_is_refused(
    environ: dict[str, str], named: str
) -> None:
    """The SDK warns and samples everything instead (probe)."""
    with pytest.raises(ConfigError, match=named):
        Tracing.from_env("rag-test", {"OTEL_TRACES_EXPORTER": "console", **environ})


def test_a_batch_processor_setting_the_sdk_refuses_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK reads OTEL_BSP_* itself and raised a bare ValueError: a
    traceback at start-up, exit 1 (probe)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "-5")
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_SCHEDULE_DELAY": "-5"}
    with pytest.raises(ConfigError, match=r"OTEL_BSP_SCHEDULE_DELAY: .*positive"):
        Tracing.from_env("rag-test", environ)


def test_a_ratio_sampler_in_any_case_is_accepted() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_TRACES_SAMPLER": "ParentBased_TraceIdRatio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
    }
    tracing = Tracing.from_env("rag-test", environ)
    assert tracing.enabled
    tracing.shutdown(0.1)
