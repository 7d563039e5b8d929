"""Store mode chosen by environment variables alone; contradictions refused
at start-up with a message naming the variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.runtime.settings import load_settings
from services.storage.settings import RefreshPolicy, StoreMode, StoreSettings
from tests.storage.store_env import assert_refused_naming

pytestmark = pytest.mark.unit


def test_no_urls_means_embedded_in_the_data_dir(env, tmp_path: Path) -> None:
    env.setenv("RAG_DATA_DIR", str(tmp_path))
    settings = load_settings(StoreSettings)
    assert settings.resolved_mode() is StoreMode.EMBEDDED
    assert not settings.is_server
    assert settings.data_dir == tmp_path


def test_both_urls_mean_server_mode_with_the_documented_defaults(env) -> None:
    env.setenv("QDRANT_URL", "http://qdrant:6333")
    env.setenv("OPENSEARCH_URL", "https://opensearch:9200")
    settings = load_settings(StoreSettings)
    assert settings.resolved_mode() is StoreMode.SERVER
    assert (settings.qdrant_collection, settings.opensearch_index) == ("rag_chunks", "rag-chunks")
    assert settings.qdrant_prefer_grpc is True
    assert settings.opensearch_refresh is RefreshPolicy.WAIT_FOR


def test_server_variables_are_read_under_their_own_names(env) -> None:
    values = {
        "QDRANT_URL": "https://q.example:6333",
        "QDRANT_API_KEY": "k",
        "QDRANT_COLLECTION": "chunks_v2",
        "QDRANT_PREFER_GRPC": "false",
        "QDRANT_TIMEOUT_S": "2.5",
        "OPENSEARCH_URL": "https://os.example:9200",
        "OPENSEARCH_INDEX": "chunks-v2",
        "OPENSEARCH_USER": "rag",
        "OPENSEARCH_PASSWORD": "pw",
        "OPENSEARCH_VERIFY_CERTS": "false",
        "OPENSEARCH_TIMEOUT_S": "4",
    }
    for name, value in values.items():
        env.setenv(name, value)
    s = load_settings(StoreSettings)
    assert (s.qdrant_url, s.qdrant_collection, s.qdrant_prefer_grpc) == (
        "https://q.example:6333",
        "chunks_v2",
        False,
    )
    assert s.qdrant_api_key is not None and s.qdrant_api_key.get_secret_value() == "k"
    assert (s.qdrant_timeout_s, s.opensearch_timeout_s) == (2.5, 4.0)
    assert (s.opensearch_index, s.opensearch_user, s.opensearch_verify_certs) == (
        "chunks-v2",
        "rag",
        False,
    )
    assert s.opensearch_password is not None and "pw" not in repr(s)  # secrets stay out of logs


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"QDRANT_URL": "http://qdrant:6333"}, ["QDRANT_URL", "OPENSEARCH_URL"]),
        ({"OPENSEARCH_URL": "http://os:9200"}, ["QDRANT_URL", "OPENSEARCH_URL"]),
        (
            {"RAG_STORE_MODE": "embedded", "QDRANT_URL": "http://q", "OPENSEARCH_URL": "http://o"},
            ["RAG_STORE_MODE=embedded", "QDRANT_URL", "OPENSEARCH_URL"],
        ),
        ({"RAG_STORE_MODE": "server"}, ["RAG_STORE_MODE=server", "QDRANT_URL", "OPENSEARCH_URL"]),
        (
            {"RAG_STORE_MODE": "server", "QDRANT_URL": "http://q"},
            ["RAG_STORE_MODE=server", "OPENSEARCH_URL unset"],
        ),
    ],
)
def test_contradictions_are_refused_naming_the_variables(env, variables, named) -> None:
    assert_refused_naming(env, variables, named)


def test_explicit_modes_that_agree_with_the_urls_are_accepted(env) -> None:
    env.setenv("RAG_STORE_MODE", "embedded")
    assert load_settings(StoreSettings).resolved_mode() is StoreMode.EMBEDDED
    env.setenv("RAG_STORE_MODE", "server")
    env.setenv("QDRANT_URL", "http://qdrant:6333")
    env.setenv("OPENSEARCH_URL", "http://opensearch:9200")
    assert load_settings(StoreSettings).resolved_mode() is StoreMode.SERVER


def test_a_blank_url_counts_as_unset(env) -> None:
    env.setenv("QDRANT_URL", "  ")
    env.setenv("OPENSEARCH_URL", "")
    assert load_settings(StoreSettings).resolved_mode() is StoreMode.EMBEDDED


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("QDRANT_TIMEOUT_S", "soon"),
        ("OPENSEARCH_TIMEOUT_S", "0"),
        ("RAG_STORE_MODE", "cluster"),
        ("OPENSEARCH_REFRESH", "sometimes"),
    ],
)
def test_bad_values_name_the_real_variable(env, name: str, value: str) -> None:
    env.setenv(name, value)
    with pytest.raises(ConfigError, match=f"{name}={value!r}"):
        load_settings(StoreSettings)


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"POSTGRES_URL": "garbage"}, ["POSTGRES_URL", "not a PostgreSQL URL"]),
        ({"POSTGRES_URL": "postgresql://rag:pw@db:99999/rag"}, ["POSTGRES_URL", "port"]),
        (
            {"QDRANT_URL": "qdrant", "OPENSEARCH_URL": "http://opensearch:9200"},
            ["QDRANT_URL", "not an http(s) URL"],
        ),
        (
            {"QDRANT_URL": "http://qdrant:6333", "OPENSEARCH_URL": "opensearch:9200"},
            ["OPENSEARCH_URL", "not an http(s) URL"],
        ),
        ({"RAG_POSTGRES_URL": "postgresql://rag@db/rag"}, ["RAG_POSTGRES_URL", "POSTGRES_URL"]),
        ({"RAG_QDRANT_URL": "http://qdrant:6333"}, ["RAG_QDRANT_URL", "set QDRANT_URL"]),
    ],
)
def test_a_store_url_of_the_wrong_form_or_name_is_refused_before_a_connection(
    env: pytest.MonkeyPatch, variables: dict[str, str], named: list[str]
) -> None:
    """`POSTGRES_URL=garbage` or `QDRANT_URL=qdrant` failed on the first
    connection, after the model loaded, as a traceback; RAG_POSTGRES_URL was
    ignored and the service ran on an empty embedded store (probe)."""
    assert_refused_naming(env, variables, named)


def test_a_refused_postgres_url_never_shows_its_password(env: pytest.MonkeyPatch) -> None:
    env.setenv("POSTGRES_URL", "postgres://rag:s3cret-pw@db:0x/rag")
    with pytest.raises(ConfigError) as refused:
        load_settings(StoreSettings)
    assert "s3cret" not in str(refused.value) and "POSTGRES_URL" in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://rag:secret@postgres:5432/rag",
        "postgres://rag@localhost/rag?sslmode=require",
        "postgresql:///rag?host=/var/run/postgresql",
        "host=db port=5432 dbname=rag user=rag",
    ],
)
def test_every_form_libpq_reads_is_accepted(env: pytest.MonkeyPatch, url: str) -> None:
    env.setenv("POSTGRES_URL", url)
    assert load_settings(StoreSettings).resolved_mode() is StoreMode.POSTGRES


def test_a_data_dir_under_home_is_expanded_and_a_blank_xdg_home_is_unset(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env.setenv("HOME", str(tmp_path))
    env.setenv("RAG_DATA_DIR", "~/rag")
    assert load_settings(StoreSettings).data_dir == tmp_path / "rag"
    env.delenv("RAG_DATA_DIR")
    env.setenv("XDG_DATA_HOME", "")  # the XDG spec: empty means unset, not "."
    assert load_settings(StoreSettings).data_dir == tmp_path / ".local/share/rag-services"
