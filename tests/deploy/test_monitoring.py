"""deploy/'s monitoring stays consistent with the services and with itself:
the alert rules and the Grafana dashboard query only metrics, labels and label
values of the metrics contract (metrics_contract.py); Prometheus scrapes every
service on its metrics port, in compose and in Kubernetes; the metrics ports
are reachable from Prometheus but never published; the PrometheusRule carries
alerts.yml unchanged."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from pydantic_settings import BaseSettings

from gateway.metrics import GatewayMetrics
from tests.deploy.metrics_contract import (
    CONTRACT,
    EXPORTED_BY,
    HOST_VARIABLES,
    METRICS_PATH,
    METRICS_PORTS,
    PORT_VARIABLES,
    TARGET_LABELS,
    series_index,
)
from tests.deploy.test_manifests import SETTINGS_BY_MODULE, env_names, module_of

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "rag-query-path.json"
JOB_OF_MODULE = {
    "services.indexer": "indexer",
    "services.retriever": "retriever",
    "services.reranker": "reranker",
    "gateway": "gateway",
}
EXPECTED_ALERTS = {
    "RagRetrieverDegradedAnswers",
    "RagRerankFallbackRate",
    "RagRetrieveLatencyP99High",
    "RagGatewayUpstreamErrors",
    "RagRerankerModelNotLoaded",
    "RagIndexerPendingRecords",
    "RagGrpcErrorRate",
    "RagTargetDown",
}


# -- a small PromQL reader: which series, matchers and grouping labels ---------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}])
    """,
    re.VERBOSE,
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATIONS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk",
    "quantile", "count_values", "group", "limitk", "limit_ratio",
}  # fmt: skip
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_LITERAL = re.compile(r"[A-Za-z0-9_.\-+]+")  # a regex alternative that is a plain value


@dataclass
class Selector:
    series: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Query:
    selectors: list[Selector]
    grouping: list[str]


def read_promql(expr: str) -> Query:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        assert match, f"cannot read {expr[position : position + 30]!r} in {expr!r}"
        position = match.end()
        if match.lastgroup not in ("space", "comment"):
            tokens.append((str(match.lastgroup), match.group()))
    selectors: list[Selector] = []
    grouping: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "op" and text == "{" and (i == 0 or tokens[i - 1][0] != "ident"):
            raise AssertionError(f"a selector without a metric name in {expr!r}")
        if kind != "ident":
            i += 1
            continue
        if text in _GROUPING and following == "(":
            i += 2
            while tokens[i][1] != ")":
                if tokens[i][0] == "ident":
                    grouping.append(tokens[i][1])
                i += 1
        elif text in _GROUPING or text in _AGGREGATIONS or text.lower() in _KEYWORDS:
            pass
        elif following == "(":
            pass  # a function
        else:
            selector = Selector(text)
            if following == "{":
                i += 2
                while tokens[i][1] != "}":
                    if tokens[i][1] == ",":
                        i += 1
                        continue
                    label, op, value = (token[1] for token in tokens[i : i + 3])
                    selector.matchers.append((label, op, ast.literal_eval(value)))
                    i += 3
            selectors.append(selector)
        i += 1
    return Query(selectors, grouping)


def allowed_labels(series: str) -> set[str]:
    _, metric = series_index()[series]
    return set(metric.labels) | TARGET_LABELS | ({"le"} if series.endswith("_bucket") else set())


def contract_problems(expr: str, labels_used: Iterable[str] = ()) -> list[str]:
    """What in `expr` the metrics contract does not allow; `labels_used`: label
    names the caller reads from the result (legend, annotation templates)."""
    index = series_index()
    query = read_promql(expr)
    problems: list[str] = []
    known: set[str] = set()
    for selector in query.selectors:
        if selector.series not in index:
            problems.append(f"{selector.series}: not in the metrics contract")
            continue
        _, metric = index[selector.series]
        allowed = allowed_labels(selector.series)
        known |= allowed
        for label, op, value in selector.matchers:
            if label not in allowed:
                problems.append(f"{selector.series}: no label {label!r}")
                continue
            values = metric.labels.get(label)
            if values is None:
                continue
            wanted = value.split("|") if op in ("=~", "!~") else [value]
            for one in wanted:
                if (op in ("=", "!=") or _LITERAL.fullmatch(one)) and one not in values:
                    problems.append(f"{selector.series}: {label} is never {one!r}")
    for label in [*query.grouping, *labels_used]:
        if label not in known:
            problems.append(f"{label!r} is a label of none of {sorted(known)}")
    return problems


# -- the alert rules ---------------------------------------------------------------


@pytest.fixture(scope="module")
def alerts() -> dict[str, Any]:
    return yaml.safe_load(ALERTS.read_text())


def rules_of(alerts: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in alerts["groups"] for rule in group["rules"]]


def test_alert_rules_are_complete(alerts) -> None:
    assert set(alerts) == {"groups"}
    groups = [group["name"] for group in alerts["groups"]]
    assert len(groups) == len(set(groups)), groups
    names = [rule["alert"] for rule in rules_of(alerts)]
    assert sorted(names) == sorted(EXPECTED_ALERTS)
    for rule in rules_of(alerts):
        name = rule["alert"]
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, name
        assert rule["expr"].strip(), name
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert set(rule["annotations"]) == {"summary", "description"}, name
        assert rule["annotations"]["summary"].strip(), name
        # What it means and the first thing to look at.
        assert "First check" in rule["annotations"]["description"], name


def test_alerts_query_only_the_metrics_contract(alerts) -> None:
    problems = {}
    for rule in rules_of(alerts):
        text = " ".join(rule["annotations"].values())
        templated = set(re.findall(r"\$labels\.(\w+)", text))
        if found := contract_problems(rule["expr"], templated):
            problems[rule["alert"]] = found
    assert problems == {}


def test_alert_ratios_and_quantiles_are_guarded_against_no_traffic(alerts) -> None:
    """0/0 is NaN and compares false, but an explicit guard says so, and keeps
    a ratio alert quiet when a denominator series exists with no traffic."""
    for rule in rules_of(alerts):
        expr = rule["expr"]
        if "/" in expr or "histogram_quantile" in expr:
            guarded = re.search(r"\band\b(\s+on\s*\([^)]*\))?[^/]*>\s*0\s*$", expr.strip())
            assert guarded or "clamp_min" in expr, rule["alert"]


def test_alerts_and_the_metrics_contract_agree_on_the_guarded_thresholds(alerts) -> None:
    by_name = {rule["alert"]: rule for rule in rules_of(alerts)}
    retrieve = by_name["RagRetrieveLatencyP99High"]["expr"]
    assert "histogram_quantile(0.99" in retrieve and 'grpc_method="Retrieve"' in retrieve
    errors = by_name["RagGrpcErrorRate"]["expr"]
    assert 'grpc_code=~"INTERNAL|UNKNOWN|DATA_LOSS|UNAVAILABLE"' in errors
    assert "sum by (grpc_service)" in errors  # one alert per service
    target_down = read_promql(by_name["RagTargetDown"]["expr"]).selectors[0]
    assert target_down.series == "up"
    assert set(target_down.matchers[0][2].split("|")) == set(METRICS_PORTS)


def test_the_promql_reader_catches_what_the_contract_does_not_allow() -> None:
    """The checks above are only as good as the reader: it must see these."""
    stages = 'rate(rag_retriever_stage_duration_seconds_bucket{stage="total"}[5m])'
    assert contract_problems(f"histogram_quantile(0.9, sum by (le, stage) ({stages}))") == []
    assert contract_problems("rate(rag_retriever_answer_total[5m])") == [
        "rag_retriever_answer_total: not in the metrics contract"
    ]
    assert contract_problems('sum(rate(rag_retriever_rerank_total{outcome="fallbacks"}[5m]))') == [
        "rag_retriever_rerank_total: outcome is never 'fallbacks'"
    ]
    assert contract_problems('rate(rag_retriever_rerank_total{outcome=~"used|sometimes"}[5m])') == [
        "rag_retriever_rerank_total: outcome is never 'sometimes'"
    ]
    assert contract_problems("sum by (scope) (rag_index_chunks)") == [
        "'scope' is a label of none of ['instance', 'job', 'scope_id']"
    ]
    assert contract_problems('rag_reranker_model_loaded{reason="x"}') == [
        "rag_reranker_model_loaded: no label 'reason'"
    ]
    assert contract_problems("rag_retriever_stage_duration_seconds") == [
        "rag_retriever_stage_duration_seconds: not in the metrics contract"  # a histogram's base
    ]
    with pytest.raises(AssertionError, match="without a metric name"):
        read_promql('{__name__="up"}')


def test_variables_named_in_alerts_and_dashboard_exist() -> None:
    text = ALERTS.read_text() + DASHBOARD.read_text()
    named = set(re.findall(r"\bRAG_[A-Z0-9_]*[A-Z0-9]\b", text))
    classes: set[type[BaseSettings]] = {c for cs in SETTINGS_BY_MODULE.values() for c in cs}
    readable = set().union(*(env_names(cls) for cls in classes))
    assert named and named <= readable, named - readable


# -- the dashboard -----------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for panel in panels:
        found.append(panel)
        found.extend(all_panels(panel.get("panels", [])))  # a collapsed row's
    return found


def test_dashboard_is_importable_with_a_datasource_variable(dashboard) -> None:
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = all_panels(dashboard["panels"])
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_dashboard_queries_only_the_metrics_contract(dashboard) -> None:
    problems = {}
    for panel in all_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            expr = target["expr"].replace("$__rate_interval", "5m")
            if found := contract_problems(expr, legend):
                problems[f"{panel['title']} / {target['refId']}"] = found
    assert problems == {}


def test_dashboard_shows_every_metric_of_the_contract(dashboard) -> None:
    index = series_index()
    shown = {
        index[selector.series][0]
        for panel in all_panels(dashboard["panels"])
        for target in panel.get("targets", [])
        for selector in read_promql(target["expr"].replace("$__rate_interval", "5m")).selectors
    }
    assert set(CONTRACT) - shown == set()


def test_dashboard_follows_the_query_path(dashboard) -> None:
    rows = [panel["title"] for panel in dashboard["panels"] if panel["type"] == "row"]
    order = ["Gateway", "Retrieve", "stages", "degradations", "Rerank", "Reranker", "embedding"]
    positions = [next(i for i, row in enumerate(rows) if word in row) for word in order]
    assert positions == sorted(positions), rows
    assert "Indexer" in rows[-1]


# -- the metrics contract against the code that exists ------------------------------


def test_contract_ports_are_the_services_defaults() -> None:
    for module, classes in SETTINGS_BY_MODULE.items():
        job = JOB_OF_MODULE[module]
        defaults = {
            name: info.default
            for cls in classes
            for name, info in cls.model_fields.items()
            if f"{cls.model_config.get('env_prefix', '')}{name}".upper() == PORT_VARIABLES[job]
        }
        assert list(defaults.values()) == [METRICS_PORTS[job]], (job, defaults)


def test_gateway_metrics_match_the_contract() -> None:
    """The gateway's metrics exist already: its part of the contract is theirs."""
    exported = {}
    for metric in vars(GatewayMetrics()).values():
        if isinstance(metric, MetricWrapperBase):
            kind = metric._type  # counter, gauge, histogram
            name = f"{metric._name}_total" if kind == "counter" else metric._name
            exported[name] = (kind, set(metric._labelnames))
    contract = {
        name: (CONTRACT[name].kind, set(CONTRACT[name].labels)) for name in EXPORTED_BY["gateway"]
    }
    assert exported == contract


# -- Prometheus in docker compose ----------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def prometheus_config() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())


def rag_compose_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Job name → compose service, for the four services (not the cli)."""
    return {
        JOB_OF_MODULE[module_of(spec["command"])]: {"name": name, **spec}
        for name, spec in compose["services"].items()
        if "profiles" not in spec and spec.get("image", "").startswith("${RAG_IMAGE")
    }


def container_port(mapping: str | dict[str, Any]) -> int:
    if isinstance(mapping, dict):
        return int(mapping["target"])
    return int(str(mapping).rsplit(":", 1)[-1].split("/")[0])


def test_prometheus_scrapes_every_service_on_its_metrics_port(compose, prometheus_config) -> None:
    services = rag_compose_services(compose)
    jobs = {job["job_name"]: job for job in prometheus_config["scrape_configs"]}
    assert set(jobs) == set(METRICS_PORTS)
    for name, port in METRICS_PORTS.items():
        job = jobs[name]
        assert job.get("metrics_path", "/metrics") == METRICS_PATH, name
        assert job.get("scheme", "http") == "http", name
        targets = [t for config in job["static_configs"] for t in config["targets"]]
        assert targets == [f"{services[name]['name']}:{port}"], name
    rule_files = prometheus_config["rule_files"]
    assert [(DEPLOY / "prometheus" / f).resolve() for f in rule_files] == [ALERTS.resolve()]


def test_compose_metrics_listeners_are_reachable_inside_the_network_only(compose) -> None:
    for job, spec in rag_compose_services(compose).items():
        env = {key: str(value) for key, value in spec["environment"].items()}
        assert env[HOST_VARIABLES[job]] == "0.0.0.0", job
        assert env[PORT_VARIABLES[job]] == str(METRICS_PORTS[job]), job
        published = {container_port(p) for p in spec.get("ports", [])}
        assert METRICS_PORTS[job] not in published, f"{job} publishes its metrics port"
    for name, spec in compose["services"].items():
        for mapping in spec.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping} widely"


def pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and bool(re.fullmatch(r"v?\d+\.\d+\.\d+", tag))


def test_compose_runs_prometheus_with_the_rules_read_only(compose, prometheus_config) -> None:
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:") and pinned(prometheus["image"])
    mounts = set(prometheus["volumes"])
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    for rule_file in prometheus_config["rule_files"]:
        assert f"./prometheus/{rule_file}:/etc/prometheus/{rule_file}:ro" in mounts
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert prometheus["read_only"] is True and prometheus["cap_drop"] == ["ALL"]
    assert prometheus["healthcheck"]["test"]


def test_compose_grafana_provisions_the_dashboard(compose) -> None:
    grafana = compose["services"]["grafana"]
    assert grafana["image"].startswith("grafana/grafana:") and pinned(grafana["image"])
    assert grafana["profiles"] == ["monitoring"]
    mounts = {m.split(":")[0]: m.split(":")[1] for m in grafana["volumes"] if m.endswith(":ro")}
    provisioning = DEPLOY / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    assert datasources["datasources"][0]["type"] == "prometheus"
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    providers = yaml.safe_load((provisioning / "dashboards" / "rag.yml").read_text())
    dashboards_dir = providers["providers"][0]["options"]["path"]
    assert mounts["./grafana/rag-query-path.json"] == f"{dashboards_dir}/{DASHBOARD.name}"
    assert mounts["./grafana/provisioning/datasources"] == "/etc/grafana/provisioning/datasources"
    assert mounts["./grafana/provisioning/dashboards"] == "/etc/grafana/provisioning/dashboards"


# -- Prometheus in Kubernetes --------------------------------------------------------


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def k8s() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    return [d for r in kustomization["resources"] for d in load_all(DEPLOY / "k8s" / r)]


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def rag_deployments(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Job name → Deployment, for the four services."""
    found = {}
    for deployment in of_kind(docs, "Deployment").values():
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        if container["image"] == "rag-services":
            found[JOB_OF_MODULE[module_of(container["args"])]] = deployment
    return found


def pod_env(container: dict[str, Any], config_maps: dict[str, dict[str, Any]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]]["data"])
    env.update({v["name"]: str(v.get("value", "from-a-secret")) for v in container.get("env", [])})
    return env


def test_kubernetes_pods_are_annotated_for_scraping(k8s) -> None:
    deployments = rag_deployments(k8s)
    assert set(deployments) == set(METRICS_PORTS)
    config_maps = of_kind(k8s, "ConfigMap")
    for job, deployment in deployments.items():
        template = deployment["spec"]["template"]
        container = template["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == METRICS_PORTS[job], job
        assert template["metadata"]["annotations"] == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(ports["metrics"]),
            "prometheus.io/path": METRICS_PATH,
        }, job
        env = pod_env(container, config_maps)
        assert env[HOST_VARIABLES[job]] == "0.0.0.0", job
        assert env[PORT_VARIABLES[job]] == str(ports["metrics"]), job


def test_kubernetes_metrics_services_list_every_pod_and_public_ones_do_not(k8s) -> None:
    services = of_kind(k8s, "Service")
    for job, deployment in rag_deployments(k8s).items():
        metrics = services[f"{job}-metrics"]
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert metrics["spec"]["selector"].items() <= pod_labels.items(), job
        assert metrics["spec"]["clusterIP"] == "None", job
        assert metrics["spec"]["publishNotReadyAddresses"] is True, job
        assert metrics["spec"]["ports"] == [
            {"name": "metrics", "port": METRICS_PORTS[job], "targetPort": "metrics"}
        ], job
        assert metrics["metadata"]["labels"]["app.kubernetes.io/name"] == job
        public = services[deployment["metadata"]["name"]]
        assert "metrics" not in {p["targetPort"] for p in public["spec"]["ports"]}, job


@pytest.fixture(scope="module")
def monitoring() -> dict[str, dict[str, Any]]:
    component = yaml.safe_load((DEPLOY / "k8s" / "monitoring" / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    docs = [d for r in component["resources"] for d in load_all(DEPLOY / "k8s" / "monitoring" / r)]
    return {d["kind"]: d for d in docs}


def test_the_operator_objects_are_an_optional_component() -> None:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    assert not any("monitoring" in resource for resource in kustomization["resources"])
    assert "components" not in kustomization  # opt-in: the CRDs may be missing


def test_service_monitor_scrapes_exactly_the_metrics_services(k8s, monitoring) -> None:
    monitor = monitoring["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    selected = {
        name
        for name, service in of_kind(k8s, "Service").items()
        if wanted <= service["metadata"].get("labels", {}).items()
    }
    assert selected == {f"{job}-metrics" for job in METRICS_PORTS}
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": METRICS_PATH, "scheme": "http", "interval": "15s"}
    ]
    # The job label is the service's name, as in the compose scrape jobs.
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"


def test_prometheus_rule_is_alerts_yml(monitoring, alerts) -> None:
    rule = monitoring["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == alerts, (
        "deploy/k8s/monitoring/monitoring.yaml's PrometheusRule differs from "
        "deploy/prometheus/alerts.yml: copy the groups over, indented under spec"
    )
