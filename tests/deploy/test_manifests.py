"""deploy/ stays consistent with the code: the compose file and the Kubernetes
manifests parse, run every service with health checks, and set only
environment variables that a settings class reads (with values it accepts) or
that deploy/README.md documents as third-party. PostgreSQL mode
(docker-compose.postgres.yml over the compose file, the k8s-overlays/postgres
overlay over the manifests) switches the stores and nothing else."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic_settings import BaseSettings

from gateway.settings import GatewaySettings
from services.indexer.settings import IndexerSettings
from services.reranker.settings import RerankerSettings
from services.retriever.settings import RetrieverSettings
from services.runtime.server import LIVENESS_SERVICE
from services.runtime.settings import load_settings
from services.storage.settings import StoreMode, StoreSettings
from tests.deploy.compose import active_services, environment, load_compose

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
) -> StoreMode | None:
    """The store mode the settings resolve to (None for a service without stores)."""
    classes = SETTINGS_BY_MODULE[module]
    readable = set().union(*(env_names(cls) for cls in classes))
    unknown = sorted(set(env) - readable)
    assert not unknown, f"{where}: {unknown} are read by none of {[c.__name__ for c in classes]}"
    mode = None
    with monkeypatch.context() as patched:
        for name in readable:  # nothing from the test's own environment
            patched.delenv(name, raising=False)
        for name, value in env.items():
            patched.setenv(name, value)
        for cls in classes:
            settings = load_settings(cls)  # raises ConfigError naming a bad value
            if isinstance(settings, StoreSettings):
                mode = settings.resolved_mode()
    return mode


# -- docker-compose.yml -----------------------------------------------------------


COMPOSE_FILES = (DEPLOY / "docker-compose.yml", DEPLOY / "docker-compose.postgres.yml")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def our_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: spec
        for name, spec in compose["services"].items()
        if "profiles" not in spec
        and (spec.get("image", "").startswith("${RAG_IMAGE") or is_rag_image(spec.get("image", "")))
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
            assert check[1:4] == ["python", "-m", "services.runtime.healthcheck"], name
            assert check[4] == f"127.0.0.1:{GRPC_PORTS[module]}" and port == str(GRPC_PORTS[module])
        else:
            assert f"http://127.0.0.1:{port}/readyz" in " ".join(check), name


def test_compose_containers_are_hardened(compose) -> None:
    for name, spec in our_services(compose).items():
        assert spec["read_only"] is True, name
        assert spec["user"] == "10001:10001" and spec["cap_drop"] == ["ALL"], name
        assert spec["build"]["dockerfile"] == "deploy/Dockerfile"


def test_compose_sets_only_variables_the_services_read(compose, monkeypatch) -> None:
    modes = {}
    for name, spec in our_services(compose).items():
        module = module_of(spec["command"])
        env = {key: str(value) for key, value in spec["environment"].items()}
        modes[name] = assert_settings_accept(module, env, monkeypatch, f"compose service {name}")
    assert modes["indexer"] == modes["retriever"] == StoreMode.SERVER


def mounted_secrets(spec: dict[str, Any]) -> set[str]:
    """Where a compose service sees its secrets: /run/secrets/<target>, the
    target being the secret's name unless the long form names another."""
    return {
        "/run/secrets/"
        + (entry if isinstance(entry, str) else entry.get("target", entry["source"]))
        for entry in spec.get("secrets", [])
    }


@pytest.mark.parametrize("files", [COMPOSE_FILES[:1], COMPOSE_FILES], ids=["server", "postgres"])
def test_compose_services_read_only_secrets_they_mount(files: tuple[Path, ...]) -> None:
    """A path under /run/secrets/ in a service's environment, command or
    health check is a secret that service mounts at that very path."""
    for name, spec in load_compose(*files)["services"].items():
        named = set(re.findall(r"/run/secrets/[\w.-]+", yaml.safe_dump(spec)))
        missing = sorted(named - mounted_secrets(spec))
        assert not missing, f"{name} names {missing} but mounts {sorted(mounted_secrets(spec))}"


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


# -- docker-compose.postgres.yml (PostgreSQL mode) ---------------------------------


@pytest.fixture(scope="module")
def postgres_compose() -> dict[str, Any]:
    """`-f docker-compose.yml -f docker-compose.postgres.yml`, merged as Compose does."""
    return load_compose(*COMPOSE_FILES)


def test_compose_postgres_profile_runs_pgvector_with_a_volume_and_a_health_check(compose) -> None:
    spec = compose["services"]["postgres"]
    assert spec["profiles"] == ["postgres"]
    assert spec["image"] == "pgvector/pgvector:pg17"
    assert "postgres-data:/var/lib/postgresql/data" in spec["volumes"]
    assert "postgres-data" in compose["volumes"]
    assert "pg_isready" in " ".join(spec["healthcheck"]["test"])
    assert all(str(port).startswith("127.0.0.1:") for port in spec["ports"])
    # The image's entrypoint runs `postgres` with these flags; the cache holds
    # the index's working set, not PostgreSQL's default 128 MB.
    assert spec["command"][:1] == ["postgres"] and "shared_buffers=1GB" in spec["command"]


def test_compose_postgres_mode_switches_only_the_stores(
    compose, postgres_compose, monkeypatch
) -> None:
    active = active_services(postgres_compose, ["postgres"])
    assert {"postgres", "indexer", "retriever", "reranker", "gateway"} <= set(active)
    assert "qdrant" not in active and "opensearch" not in active
    database = postgres_compose["services"]["postgres"]["environment"]
    for name in ("indexer", "retriever"):
        env = environment(active[name])
        assert env["RAG_STORE_MODE"] == "postgres", name
        assert env["POSTGRES_SCHEMA"], name
        url = urlsplit(env["POSTGRES_URL"])
        assert (url.hostname, url.port, url.path) == (
            "postgres",
            5432,
            f"/{database['POSTGRES_DB']}",
        )
        assert (url.username, url.password) == (
            database["POSTGRES_USER"],
            database["POSTGRES_PASSWORD"],
        ), name
        # The services refuse POSTGRES_URL together with QDRANT_URL or OPENSEARCH_URL.
        assert not [k for k in env if k.startswith(("QDRANT_", "OPENSEARCH_"))], name
        assert active[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name, spec in active.items():
        stopped = set(spec.get("depends_on", {})) - set(active)
        assert not stopped, f"{name} waits for {stopped}, which do not start"
    modes = {}
    for name, spec in our_services(postgres_compose).items():
        module = module_of(spec["command"])
        env = environment(spec)
        modes[name] = assert_settings_accept(module, env, monkeypatch, f"postgres compose {name}")
        # Everything but the stores is as in server mode.
        server_env = environment(compose["services"][name])
        changed = {k for k in set(env) | set(server_env) if env.get(k) != server_env.get(k)}
        stores = ("POSTGRES_", "QDRANT_", "OPENSEARCH_", "RAG_STORE_MODE")
        assert all(k.startswith(stores) for k in changed), (name, changed)
    assert modes["indexer"] == modes["retriever"] == StoreMode.POSTGRES


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


def is_rag_image(image: str) -> bool:
    """The project's image, as written (`rag-services`) or as kustomize's
    `images:` renames it (`registry.example.com/rag-services:latest`)."""
    return image.rsplit("/", 1)[-1].split(":")[0] == "rag-services"


def rag_containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: deployment["spec"]["template"]["spec"]["containers"][0]
        for name, deployment in of_kind(docs, "Deployment").items()
        if is_rag_image(deployment["spec"]["template"]["spec"]["containers"][0]["image"])
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
        check = ["python", "-m", "services.runtime.healthcheck", f"127.0.0.1:{port}"]
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


def kubernetes_env_is_accepted(
    docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, secret_values: dict[str, str]
) -> dict[str, StoreMode | None]:
    """Every rag container's environment is read by its settings; the store
    mode each resolves to, by Deployment."""
    config_maps = of_kind(docs, "ConfigMap")
    modes = {}
    for name, container in rag_containers(docs).items():
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
        for variable in container.get("env", []):
            # Secrets are created by the operator; a valid value stands in here
            # (long enough for a key: RAG_PAGE_TOKEN_KEY needs 32 characters).
            env[variable["name"]] = variable.get(
                "value", secret_values.get(variable["name"], "from-a-secret-the-operator-created")
            )
        module = module_of(container["args"])
        assert env[PORT_VARIABLE[module]] == str(container["ports"][0]["containerPort"])
        modes[name] = assert_settings_accept(module, env, monkeypatch, f"k8s deployment {name}")
    return modes


def test_kubernetes_sets_only_variables_the_services_read(k8s, monkeypatch) -> None:
    modes = kubernetes_env_is_accepted(k8s, monkeypatch, {})
    assert modes["indexer"] == modes["retriever"] == StoreMode.SERVER


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


def image_env(dockerfile: str) -> dict[str, str]:
    runtime = runtime_stage(dockerfile)
    block = re.search(r"^ENV (.*?)(?=^\S)", runtime, re.MULTILINE | re.DOTALL)
    assert block is not None
    return dict(re.findall(r"([A-Z_][A-Z0-9_]*)=(\S+)", block.group(1)))


def test_the_image_carries_its_models_so_no_container_builds_one() -> None:
    # Built at start, the e5 graphs import PyTorch (~2.5 GiB peak, above the
    # Retriever pod's 2 GiB limit) and take ~570 MB (above a pod's /tmp).
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    cache = image_env(dockerfile)["RAG_EMBEDDING_CACHE_DIR"]
    build = r"python -m services\.embedding\.e5_build (\S+) (fp32|int8) \d+"
    builds = re.findall(build, dockerfile)
    assert sorted(builds) == [(cache, "fp32"), (cache, "int8")]
    assert re.search(rf"^COPY --from=\w+ {re.escape(cache.rsplit('/', 1)[0])} ", dockerfile, re.M)
    assert "python -m services.embedding.packaged_files" in dockerfile.split(" AS runtime")[0]
    # The Reranker serves the packaged default, which those files are.
    assert "RAG_RERANK_MODEL" not in image_env(dockerfile)
    assert RerankerSettings.model_fields["rerank_model"].default.startswith("packaged:")


def test_no_deployment_moves_the_models_away_from_the_image(compose, k8s) -> None:
    """Neither compose nor the manifests point the embedding cache elsewhere
    (an empty folder: every start would build the graphs) or the Reranker at
    a model the image does not hold."""
    overlay = (POSTGRES_OVERLAY / "stores.yaml").read_text()
    texts = [yaml.safe_dump(compose), yaml.safe_dump_all(k8s), overlay]
    for text in texts:
        assert "RAG_EMBEDDING_CACHE_DIR" not in text
        assert "RAG_RERANK_MODEL" not in text and "/opt/models/reranker" not in text


# -- k8s-overlays/postgres (PostgreSQL mode) ---------------------------------------------

POSTGRES_OVERLAY = DEPLOY / "k8s-overlays" / "postgres"


@pytest.fixture(scope="module")
def postgres_k8s() -> list[dict[str, Any]]:
    """The overlay as `kubectl apply -k` would apply it."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the overlay is rendered with `kubectl kustomize`")
    result = subprocess.run(
        [kubectl, "kustomize", str(POSTGRES_OVERLAY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_postgres_overlay_keeps_the_base_and_adds_postgres(k8s, postgres_k8s) -> None:
    def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in docs}

    assert names(postgres_k8s) - names(k8s) == {
        ("StatefulSet", "postgres"),
        ("Service", "postgres"),
    }
    assert names(k8s) <= names(postgres_k8s)
    assert not of_kind(postgres_k8s, "Secret"), "credentials are created by the operator"
    for doc in postgres_k8s:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "rag", doc["metadata"]["name"]


def test_the_postgres_overlay_switches_the_stores_to_postgres_url_from_a_secret(
    postgres_k8s, monkeypatch
) -> None:
    stores = of_kind(postgres_k8s, "ConfigMap")["rag-stores"]["data"]
    assert stores["RAG_STORE_MODE"] == "postgres" and stores["POSTGRES_SCHEMA"]
    assert not [k for k in stores if k.startswith(("QDRANT_", "OPENSEARCH_"))]
    assert "POSTGRES_URL" not in stores  # it holds the password: a Secret's
    containers = rag_containers(postgres_k8s)
    for name in ("indexer", "retriever"):
        env = {v["name"]: v for v in containers[name]["env"]}
        reference = env["POSTGRES_URL"]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": "rag-postgres", "key": "POSTGRES_URL"}, name
        assert not {"QDRANT_API_KEY", "OPENSEARCH_PASSWORD"} & set(env), name
    url = {"POSTGRES_URL": "postgresql://rag:secret@postgres:5432/rag"}
    modes = kubernetes_env_is_accepted(postgres_k8s, monkeypatch, url)
    assert modes["indexer"] == modes["retriever"] == StoreMode.POSTGRES
    # TLS and caller identity are the base's, untouched.
    for name, container in containers.items():
        if module_of(container["args"]) in GRPC_PORTS:
            server_env_is_mutual_tls_with_callers(container_env(container), name)


def test_the_postgres_statefulset_is_pgvector_with_a_volume_probes_and_hardening(
    postgres_k8s,
) -> None:
    statefulset = of_kind(postgres_k8s, "StatefulSet")["postgres"]
    pod = statefulset["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "pgvector/pgvector:pg17"
    env = {v["name"]: v for v in container["env"]}
    secret = env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "rag-postgres", "key": "POSTGRES_PASSWORD"}
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["PGDATA"]["value"].startswith(mounts[claim["metadata"]["name"]] + "/")
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["exec"]["command"][0] == "pg_isready", probe
    # The namespace enforces the restricted Pod Security Standard.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    # Its cache holds the index's working set, not PostgreSQL's default 128 MB.
    assert "shared_buffers=1GB" in container["args"]
    service = of_kind(postgres_k8s, "Service")["postgres"]
    assert service["spec"]["ports"][0]["port"] == 5432
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}
