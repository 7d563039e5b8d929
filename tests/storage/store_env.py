"""The store settings' environment in tests: the variables StoreSettings
reads (`env` in conftest clears them), and how a contradiction among them is
refused."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from services.core.errors import ConfigError
from services.runtime.settings import load_settings
from services.storage.settings import StoreSettings


def store_variables() -> list[str]:
    """Every environment variable StoreSettings reads."""
    names = []
    for name, info in StoreSettings.model_fields.items():
        alias = info.validation_alias
        names.append(alias if isinstance(alias, str) else f"RAG_{name.upper()}")
    return names


def assert_refused_naming(
    env: pytest.MonkeyPatch, variables: Mapping[str, str], named: Sequence[str]
) -> None:
    """With `variables` set, loading the settings is refused by a message
    naming each of `named`."""
    for name, value in variables.items():
        env.setenv(name, value)
    with pytest.raises(ConfigError) as refused:
        load_settings(StoreSettings)
    for fragment in named:
        assert fragment in str(refused.value), refused.value
