"""`python -m <service> --help` lists the environment variables the service
reads and exits 0 without starting anything; any other argument is refused
with exit status 2, so a typo never starts a server on the defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.runtime.cli_help import (
    HIDDEN,
    describe_setting,
    env_names,
    parse_command_line,
    render_help,
    settings_sections,
)
from services.runtime.settings import BaseServiceSettings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60  # a server would never end by itself; help takes well under a second

# module → variables its help must name
MODULES = {
    "services.indexer": ["RAG_INDEXER_PORT", "RAG_CHUNK_TARGET_CHARS", "QDRANT_URL", "RAG_HOST"],
    "services.retriever": [
        "RAG_RETRIEVER_PORT",
        "RAG_RERANKER_ADDR",
        "QDRANT_URL",
        "OPENSEARCH_PASSWORD",
        "RAG_EMBEDDING_MODEL",
    ],
    "services.stack": ["RAG_INDEXER_PORT", "RAG_RETRIEVER_PORT", "RAG_DATA_DIR", "QDRANT_URL"],
    "services.reranker": ["RAG_RERANKER_PORT", "RAG_RERANK_MODEL", "RAG_LOG_LEVEL"],
    "gateway": ["RAG_GATEWAY_PORT", "RAG_RETRIEVER_ADDR", "RAG_GATEWAY_RATE_LIMIT"],
}

HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime")

# Runs a module as `python -m` does and reports its exit status and the heavy
# modules it imported.
RUNNER = f"""
import json, runpy, sys
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
code = 0
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
heavy = sorted(name for name in {HEAVY!r} if name in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "QDRANT_", "OPENSEARCH_"))
    }
    # Help must not open the data folder, nor validate the settings.
    env.update(RAG_DATA_DIR=str(tmp_path / "data"), RAG_LOG_LEVEL="not-a-level", **extra)
    return env


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_help_lists_the_variables_and_exits_without_serving(module: str, tmp_path: Path) -> None:
    result = _run(["-m", module, "--help"], tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {module} [-h]")
    assert "environment variables" in result.stdout
    for name in MODULES[module]:
        assert f"\n  {name}  " in result.stdout, name
    assert result.stderr == ""
    assert not (tmp_path / "data").exists()  # no store was opened


@pytest.mark.parametrize("module", sorted(MODULES))
def test_short_help_needs_no_model_library(module: str, tmp_path: Path) -> None:
    result = _run(["-c", RUNNER, module, "-h"], tmp_path)

    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
    assert "RAG_LOG_JSON" in result.stdout


@pytest.mark.parametrize("module", sorted(MODULES))
def test_any_other_argument_is_refused(module: str, tmp_path: Path) -> None:
    result = _run(["-m", module, "--port", "9000"], tmp_path)

    assert result.returncode == 2
    assert "unrecognized arguments: --port 9000" in result.stderr
    assert "--help" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "data").exists()


# -- the renderer ---------------------------------------------------------------


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class PeerClientSettings(BaseModel):
    peer_token: SecretStr | None = Field(None, description="Bearer token for the peer")


class FakeStoreSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAG_", extra="ignore", frozen=True)

    store_url: str | None = Field(None, validation_alias="FAKE_STORE_URL", description="server")


class FakeSettings(BaseServiceSettings, PeerClientSettings):
    fake_port: int = Field(5000, ge=0, le=65535, description="port of the fake")
    fake_ratio: float = Field(0.5, gt=0, lt=1)
    fake_name: str = Field("two words", min_length=1, pattern=r"^[a-z ]+$")
    fake_colour: Colour = Field(Colour.RED, description="a colour")
    fake_mode: Literal["fast", "slow"] = "fast"
    fake_password: SecretStr = Field(SecretStr("default-s3cret"), description="never shown")
    fake_flag: bool = True
    fake_list: list[str] = Field(default_factory=list)


def test_every_variable_is_listed_once_in_its_class_section() -> None:
    text = render_help([FakeSettings, FakeStoreSettings])

    names = set(env_names(FakeSettings)) | set(env_names(FakeStoreSettings))
    for name in names:
        assert text.count(f"\n  {name}  ") == 1, name
    assert "FAKE_STORE_URL" in names and "RAG_FAKE_PORT" in names
    headers = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert headers[1:] == [
        "FakeSettings:",
        "FakeStoreSettings:",
        "Calls to the Peer (PeerClientSettings):",
        "Every service (BaseServiceSettings):",
    ]


def test_a_field_added_to_a_base_class_shows_up() -> None:
    class Extended(FakeSettings):
        brand_new_limit: int = Field(7, ge=1, description="added later")

    sections = dict(settings_sections([Extended]))
    assert "RAG_BRAND_NEW_LIMIT" in sections[Extended]
    assert "RAG_FAKE_PORT" in sections[FakeSettings]
    assert "RAG_LOG_LEVEL" in sections[BaseServiceSettings]


def test_types_defaults_and_allowed_values() -> None:
    text = render_help([FakeSettings])

    assert "  RAG_FAKE_PORT  int; default 5000; 0..65535\n      port of the fake\n" in text
    assert "  RAG_FAKE_RATIO  float; default 0.5; > 0; < 1\n" in text
    assert '  RAG_FAKE_NAME  string; default "two words"; length >= 1; pattern ^[a-z ]+$\n' in text
    assert "  RAG_FAKE_COLOUR  choice; default red; one of red, blue\n" in text
    assert "  RAG_FAKE_MODE  choice; default fast; one of fast, slow\n" in text
    assert "  RAG_FAKE_FLAG  bool; default true\n" in text
    assert "  RAG_FAKE_LIST  JSON list; default empty\n" in text
    assert "  RAG_LOG_LEVEL  string; default INFO\n      DEBUG | INFO | WARNING | ERROR" in text


def test_secrets_are_never_shown() -> None:
    text = render_help([FakeSettings])

    assert "default-s3cret" not in text
    assert "**" not in text
    assert f"  RAG_FAKE_PASSWORD  secret; default {HIDDEN}\n" in text
    assert "  RAG_PEER_TOKEN  secret; default unset\n" in text
    setting = describe_setting("RAG_FAKE_PASSWORD", FakeSettings.model_fields["fake_password"])
    assert setting.secret and setting.default == HIDDEN


def test_store_urls_keep_their_alias() -> None:
    from services.storage.settings import StoreSettings

    text = render_help([StoreSettings])

    for name in ("QDRANT_URL", "OPENSEARCH_URL", "OPENSEARCH_PASSWORD", "RAG_DATA_DIR"):
        assert f"\n  {name}  " in text
    assert "RAG_QDRANT_URL" not in text


def test_parse_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    def classes() -> list[type[BaseSettings]]:
        asked.append(True)
        return [FakeSettings]

    asked: list[bool] = []
    parse_command_line("python -m fake", "Runs the fake.", classes, [])
    assert asked == []  # a normal start renders nothing

    with pytest.raises(SystemExit) as exit_info:
        parse_command_line("python -m fake", "Runs the fake.", classes, ["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m fake [-h]\n\nRuns the fake.")
    assert "RAG_FAKE_PORT" in out

    with pytest.raises(SystemExit) as exit_info:
        parse_command_line("python -m fake", "Runs the fake.", classes, ["serve"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: serve" in capsys.readouterr().err
