"""Typed settings read from the environment, validated at start-up.

Every service's settings class derives from `BaseServiceSettings`; variables
carry the `RAG_` prefix (e.g. `RAG_DATA_DIR`) except the two store URLs, which
keep the names operators expect (`QDRANT_URL`, `OPENSEARCH_URL`).
`load_settings` turns a validation failure into a `ConfigError` that names the
variable and the bad value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common.errors import ConfigError

ENV_PREFIX = "RAG_"
MiB = 1024 * 1024


class BaseServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    host: str = Field("0.0.0.0", description="Interface the gRPC server binds to")
    log_level: str = Field("INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")
    log_json: bool = Field(True, description="JSON log lines (false: human-readable)")
    max_message_mb: int = Field(16, ge=1, le=256, description="gRPC max message size, MiB")
    shutdown_grace_s: float = Field(5.0, ge=0, le=120)

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * MiB


def default_data_dir() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "rag-services"


S = TypeVar("S", bound=BaseSettings)


def load_settings(cls: type[S], **overrides: Any) -> S:
    """Instantiate `cls` from the environment; raise ConfigError naming the bad value."""
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(cls, exc)) from None


def _describe(cls: type[BaseSettings], exc: ValidationError) -> str:
    prefix = str(cls.model_config.get("env_prefix", ""))
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"])
        env_name = _env_name(cls, field, prefix)
        problems.append(f"{env_name}={err.get('input')!r}: {err['msg']}")
    return "invalid settings: " + "; ".join(problems)


def _env_name(cls: type[BaseSettings], field: str, prefix: str) -> str:
    # pydantic reports an aliased field under its alias, a plain one under its name.
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str) and field in (name, alias):
            return alias.upper()
    return f"{prefix}{field}".upper()
