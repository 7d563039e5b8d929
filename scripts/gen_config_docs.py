"""Write docs/configuration.md from the settings classes, so the documented
environment variables are exactly the ones the services read.

Usage: python scripts/gen_config_docs.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "configuration.md"


def settings_classes() -> list[tuple[str, type[BaseSettings]]]:
    from gateway.settings import GatewaySettings
    from services.common.embedding_settings import EmbeddingSettings
    from services.common.settings import BaseServiceSettings
    from services.common.stores.settings import StoreSettings
    from services.indexer.settings import IndexerSettings
    from services.reranker.settings import RerankerSettings
    from services.retriever.settings import RetrieverSettings

    return [
        ("Every gRPC service", BaseServiceSettings),
        ("Stores (Indexer and Retriever)", StoreSettings),
        ("Embedding model (Indexer and Retriever)", EmbeddingSettings),
        ("Indexer", IndexerSettings),
        ("Retriever", RetrieverSettings),
        ("Reranker", RerankerSettings),
        ("Gateway", GatewaySettings),
    ]


def env_names(cls: type[BaseSettings], own_only: bool = False) -> dict[str, Any]:
    """Environment variable name → field info for `cls` (optionally minus its bases')."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    inherited: set[str] = set()
    if own_only:
        for base in cls.__mro__[1:]:
            if (
                isinstance(base, type)
                and issubclass(base, BaseSettings)
                and base is not BaseSettings
            ):
                inherited |= set(base.model_fields)
    names = {}
    for field, info in cls.model_fields.items():
        if field in inherited:
            continue
        alias = info.validation_alias
        names[alias.upper() if isinstance(alias, str) else f"{prefix}{field}".upper()] = info
    return names


def all_env_names() -> set[str]:
    return {name for _, cls in settings_classes() for name in env_names(cls)}


def _default(info: Any) -> str:
    if info.default_factory is not None:
        return "(computed)"
    value = info.default
    if hasattr(value, "value"):
        value = value.value
    return f"`{value}`" if value not in (None, "") else "(unset)"


def render() -> str:
    lines = [
        "# Configuration",
        "",
        "Every setting is an environment variable, validated when the process starts: a bad",
        "value stops it with exit status 2 and a message naming the variable and the value.",
        "This page is generated from the settings classes by `scripts/gen_config_docs.py`;",
        "a test fails when it is out of date.",
    ]
    for title, cls in settings_classes():
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for name, info in env_names(cls, own_only=cls.__name__ != "BaseServiceSettings").items():
            meaning = (info.description or "").replace("|", "\\|")
            lines.append(f"| `{name}` | {_default(info)} | {meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if TARGET.read_text() == text else 1)
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
