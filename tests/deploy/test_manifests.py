"""deploy/ stays consistent with the code: the compose file and the Kubernetes
manifests parse, run every service with health checks, and set only
environment variables that a settings class reads (with values it accepts) or
that deploy/README.md documents as third-party."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from gateway.settings import GatewaySettings
from services.common.server import LIVENESS_SERVICE
from services.common.settings import load_settings
from services.common.stores.settings import StoreSettings
from services.indexer.settings import IndexerSettings
from services.reranker.settings import RerankerSettings
from services.retriever.settings import RetrieverSettings

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# The settings classes each service's process loads, by its entry module.
SETTINGS_BY_MODULE: dict[str, list[type[BaseSettings]]] = {
    "services.indexer": [IndexerSettings, StoreSettings],
    "services.retriever": [RetrieverSettings, StoreSettings],
    "services.reranker": [RerankerSettings],
    "gateway": [GatewaySettings],
}
GRPC_PORTS = {"services.indexer": 50051, "services.retriever": 50052, "services.reranker": 50053}
PORT_VARIABLE = {
    "services.indexer": "RAG_INDEXER_PORT",
    "services.retriever": "RAG_RETRIEVER_PORT",
    "services.reranker": "RAG_RERANKER_PORT",
    "gateway": "RAG_GATEWAY_PORT",
}
# Read by Python or Hugging Face libraries, not by our settings classes;
# each must be explained in deploy/README.md.
THIRD_PARTY = {"PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "HF_HUB_OFFLINE", "HF_HOME"}


def env_names(cls: type[BaseSettings]) -> set[str]:
    prefix = str(cls.model_config.get("env_prefix", ""))
    names = set()
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        names.add(alias.upper() if isinstance(alias, str) else f"{prefix}{name}".upper())
    return names


def module_of(command: list[str]) -> str:
    assert command[:2] == ["python", "-m"], command
    return command[2]


def assert_settings_accept(
    module: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    classes = SETTINGS_BY_MODULE[module]
    readable = set().union(*(env_names(cls) for cls in classes))
    unknown = sorted(set(env) - readable)
    assert not unknown, f"{where}: {unknown} are read by none of {[c.__name__ for c in classes]}"
    with monkeypatch.context() as patched:
        for name, value in env.items():
            patched.setenv(name, value)
        for cls in classes:
            load_settings(cls)  # raises ConfigError naming a bad value


# -- docker-compose.yml -----------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def our_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: spec
        for name, spec in compose["services"].items()
        if "profiles" not in spec and spec.get("image", "").startswith("${RAG_IMAGE")
    }


def test_compose_runs_the_stores_and_the_four_services(compose) -> None:
    services = compose["services"]
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")
    assert services["opensearch"]["image"].startswith("opensearchproject/opensearch:")
    assert services["opensearch"]["environment"]["discovery.type"] == "single-node"
    assert services["redis"]["image"].startswith("redis:")
    modules = {module_of(spec["command"]): name for name, spec in our_services(compose).items()}
    assert set(modules) == set(SETTINGS_BY_MODULE)
    for name, spec in services.items():
        if "profiles" not in spec:
            assert spec["healthcheck"]["test"], f"{name} has no health check"


def test_compose_health_checks_probe_the_real_endpoints(compose) -> None:
    for name, spec in our_services(compose).items():
        module = module_of(spec["command"])
        check = spec["healthcheck"]["test"]
        port = spec["environment"][PORT_VARIABLE[module]]
        if module in GRPC_PORTS:
            assert check[1:4] == ["python", "-m", "services.common.healthcheck"], name
            assert check[4] == f"127.0.0.1:{GRPC_PORTS[module]}" and port == str(GRPC_PORTS[module])
        else:
            assert f"http://127.0.0.1:{port}/readyz" in " ".join(check), name


def test_compose_containers_are_hardened(compose) -> None:
    for name, spec in our_services(compose).items():
        assert spec["read_only"] is True, name
        assert spec["user"] == "10001:10001" and spec["cap_drop"] == ["ALL"], name
        assert spec["build"]["dockerfile"] == "deploy/Dockerfile"


def test_compose_sets_only_variables_the_services_read(compose, monkeypatch) -> None:
    for name, spec in our_services(compose).items():
        module = module_of(spec["command"])
        env = {key: str(value) for key, value in spec["environment"].items()}
        assert_settings_accept(module, env, monkeypatch, f"compose service {name}")


def test_compose_services_speak_mutual_tls_with_caller_tokens(compose) -> None:
    services = compose["services"]
    for name, spec in our_services(compose).items():
        env = {key: str(value) for key, value in spec["environment"].items()}
        if module_of(spec["command"]) in GRPC_PORTS:
            server_env_is_mutual_tls_with_callers(env, name)
    env_of = {
        n: {k: str(v) for k, v in s.get("environment", {}).items()} for n, s in services.items()
    }
    client_env_is_tls_with_a_token(env_of["retriever"], "reranker", "compose")
    client_env_is_tls_with_a_token(env_of["gateway"], "retriever", "compose")
    client_env_is_tls_with_a_token(env_of["indexer-cli"], "indexer", "compose")
    files = {secret["file"] for secret in compose["secrets"].values()}
    assert "./secrets/callers.toml" in files and "./secrets/ca.pem" in files


def test_compose_dependencies_wait_for_health(compose) -> None:
    services = compose["services"]
    assert services["indexer"]["depends_on"]["qdrant"]["condition"] == "service_healthy"
    assert services["retriever"]["depends_on"]["opensearch"]["condition"] == "service_healthy"
    assert services["gateway"]["depends_on"]["retriever"]["condition"] == "service_healthy"
    retriever_env = services["retriever"]["environment"]
    assert retriever_env["RAG_RERANKER_ADDR"] == "reranker:50053"
    assert services["gateway"]["environment"]["RAG_RETRIEVER_ADDR"] == "retriever:50052"


# -- Kubernetes -------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    documents: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        documents.extend(
            d for d in yaml.safe_load_all((DEPLOY / "k8s" / resource).read_text()) if d
        )
    return documents


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def rag_containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: deployment["spec"]["template"]["spec"]["containers"][0]
        for name, deployment in of_kind(docs, "Deployment").items()
        if deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "rag-services"
    }


def test_every_service_has_a_deployment_and_a_service(k8s) -> None:
    containers = rag_containers(k8s)
    assert {module_of(c["args"]) for c in containers.values()} == set(SETTINGS_BY_MODULE)
    services = of_kind(k8s, "Service")
    for name, container in containers.items():
        port_names = {port["name"] for port in container["ports"]}
        assert {p["targetPort"] for p in services[name]["spec"]["ports"]} <= port_names


def health_command(probe: dict[str, Any]) -> list[str]:
    return [str(part) for part in probe["exec"]["command"]]


def test_grpc_services_probe_health_over_their_own_mutual_tls(k8s) -> None:
    """Native grpc probes cannot show a client certificate, so probes run the
    health check beside the server, with the server's TLS settings."""
    for name, container in rag_containers(k8s).items():
        module = module_of(container["args"])
        if module not in GRPC_PORTS:
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
            continue
        port = GRPC_PORTS[module]
        check = ["python", "-m", "services.common.healthcheck", f"127.0.0.1:{port}"]
        assert container["ports"][0]["containerPort"] == port, name
        assert health_command(container["readinessProbe"]) == check, name
        for probe in ("livenessProbe", "startupProbe"):
            assert health_command(container[probe]) == [*check, LIVENESS_SERVICE], name
            assert container[probe]["timeoutSeconds"] >= 5, name


def server_env_is_mutual_tls_with_callers(env: dict[str, str], where: str) -> None:
    assert env["RAG_HOST"] == "0.0.0.0", where
    for name in ("RAG_TLS_CERT_FILE", "RAG_TLS_KEY_FILE", "RAG_TLS_CLIENT_CA_FILE"):
        assert env.get(name), f"{where}: {name} unset"
    assert env["RAG_TLS_REQUIRE_CLIENT_CERT"] == "true", where
    assert env.get("RAG_AUTH_CALLERS_FILE"), where
    assert "RAG_ALLOW_INSECURE" not in env, where


def client_env_is_tls_with_a_token(env: dict[str, str], target: str, where: str) -> None:
    prefix = f"RAG_{target.upper()}_"
    for name in ("TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TOKEN_FILE"):
        assert env.get(prefix + name), f"{where}: {prefix}{name} unset"


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: str(v.get("value", "from-a-secret")) for v in container.get("env", [])}


def test_kubernetes_services_speak_mutual_tls_with_caller_tokens(k8s) -> None:
    containers = rag_containers(k8s)
    for name, container in containers.items():
        if module_of(container["args"]) in GRPC_PORTS:
            server_env_is_mutual_tls_with_callers(container_env(container), name)
    client_env_is_tls_with_a_token(container_env(containers["retriever"]), "reranker", "k8s")
    client_env_is_tls_with_a_token(container_env(containers["gateway"]), "retriever", "k8s")
    certificates = of_kind(k8s, "Certificate")
    for name in ("indexer", "retriever", "reranker", "gateway"):
        assert certificates[name]["spec"]["secretName"] == f"{name}-tls"


def test_pods_are_non_root_read_only_and_have_resources(k8s) -> None:
    for name, deployment in of_kind(k8s, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for container in pod["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name


def test_stateless_services_autoscale(k8s) -> None:
    deployments = of_kind(k8s, "Deployment")
    scaled = {}
    for name, hpa in of_kind(k8s, "HorizontalPodAutoscaler").items():
        target = hpa["spec"]["scaleTargetRef"]
        assert target["kind"] == "Deployment" and target["name"] in deployments, name
        assert hpa["spec"]["minReplicas"] >= 2 and hpa["spec"]["maxReplicas"] > 2
        scaled[target["name"]] = hpa
    assert set(scaled) == {"retriever", "reranker", "gateway"}


def test_kubernetes_sets_only_variables_the_services_read(k8s, monkeypatch) -> None:
    config_maps = of_kind(k8s, "ConfigMap")
    for name, container in rag_containers(k8s).items():
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
        for variable in container.get("env", []):
            # Secrets are created by the operator; any valid value stands in here.
            env[variable["name"]] = variable.get("value", "from-a-secret")
        module = module_of(container["args"])
        assert env[PORT_VARIABLE[module]] == str(container["ports"][0]["containerPort"])
        assert_settings_accept(module, env, monkeypatch, f"k8s deployment {name}")


# -- Dockerfile ---------------------------------------------------------------------


def runtime_stage(dockerfile: str) -> str:
    return dockerfile.split(" AS runtime", 1)[1]


def test_dockerfile_is_multi_stage_non_root_with_torch_first() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, re.MULTILINE)) >= 3
    torch = dockerfile.index(
        "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    )
    assert torch < dockerfile.index("pip install --no-deps .")
    assert re.search(r"^USER 10001:10001$", runtime_stage(dockerfile), re.MULTILINE)


def test_dockerfile_env_is_read_by_the_services_or_documented() -> None:
    runtime = runtime_stage((DEPLOY / "Dockerfile").read_text())
    env_block = re.search(r"^ENV (.*?)(?=^\S)", runtime, re.MULTILINE | re.DOTALL)
    assert env_block is not None
    names = set(re.findall(r"([A-Z_][A-Z0-9_]*)=", env_block.group(1)))
    readable = set().union(*(env_names(c) for cs in SETTINGS_BY_MODULE.values() for c in cs))
    assert names - readable <= THIRD_PARTY, names - readable - THIRD_PARTY
    guide = (DEPLOY / "README.md").read_text()
    assert [name for name in sorted(THIRD_PARTY) if f"`{name}`" not in guide] == []
