"""Write docs/configuration.md from the settings classes, so the documented
environment variables are exactly the ones the services read.

Usage: python scripts/gen_config_docs.py [--check]

The rows come from `services.runtime.cli_help`, which also prints the same
variables for `python -m <service> --help`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_settings import BaseSettings

from services.runtime.cli_help import Setting, describe_setting, env_names

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "configuration.md"


def settings_classes() -> list[tuple[str, type[BaseSettings]]]:
    from gateway.settings import GatewaySettings
    from services.indexer.settings import CliSettings, IndexerSettings
    from services.reranker.settings import RerankerSettings
    from services.retriever.settings import RetrieverSettings
    from services.runtime.embedding_settings import EmbeddingSettings
    from services.runtime.settings import BaseServiceSettings, GrpcServiceSettings
    from services.storage.settings import StoreSettings

    return [
        ("Every service", BaseServiceSettings),
        ("Every gRPC service: TLS and callers (docs/security.md)", GrpcServiceSettings),
        ("Stores (Indexer and Retriever)", StoreSettings),
        ("Embedding model (Indexer and Retriever)", EmbeddingSettings),
        ("Indexer", IndexerSettings),
        ("Retriever", RetrieverSettings),
        ("Reranker", RerankerSettings),
        ("Gateway", GatewaySettings),
        ("Command line (services.operator.cli)", CliSettings),
    ]


def all_env_names() -> set[str]:
    return {name for _, cls in settings_classes() for name in env_names(cls)}


def _default(setting: Setting) -> str:
    if setting.required:
        return "(required)"
    if setting.computed:
        return "(computed)"
    return f"`{setting.default}`" if setting.default is not None else "(unset)"


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
            setting = describe_setting(name, info)
            meaning = (info.description or "").replace("|", "\\|")
            lines.append(f"| `{name}` | {_default(setting)} | {meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if TARGET.read_text() == text else 1)
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
