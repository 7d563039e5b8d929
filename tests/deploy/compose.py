"""Compose files read the way `docker compose -f A -f B` reads them, for the
parts this project's files use: YAML anchors and merge keys, the override
tags `!reset` (remove what an earlier file set) and `!override` (replace it
whole), the merge rules of the Compose specification (mappings merge,
sequences append, `command`/`entrypoint`/`healthcheck.test` are replaced),
`${NAME}`, `${NAME:-default}` and `${NAME-default}` interpolation, and
profiles. No Compose v2 binary is needed (the machines have none)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class _Reset:
    """`!reset`: the key is removed from the merged model."""


RESET = _Reset()


@dataclass(frozen=True)
class _Override:
    """`!override`: the value replaces the earlier one instead of merging."""

    value: Any


class _ComposeLoader(yaml.SafeLoader):
    pass


def _reset(loader: yaml.SafeLoader, node: yaml.Node) -> _Reset:
    return RESET


def _override(loader: yaml.SafeLoader, node: yaml.Node) -> _Override:
    if isinstance(node, yaml.MappingNode):
        return _Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return _Override(loader.construct_sequence(node, deep=True))
    return _Override(loader.construct_scalar(node))  # type: ignore[arg-type]


_ComposeLoader.add_constructor("!reset", _reset)
_ComposeLoader.add_constructor("!override", _override)

# Replaced, not appended, when a later file sets them (the specification's exceptions).
_REPLACED = {("command",), ("entrypoint",), ("healthcheck", "test")}
_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}"
)


def _plain(value: Any) -> Any:
    """`value` without override markers (a first file's tags mean nothing)."""
    if isinstance(value, _Override):
        return _plain(value.value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not RESET}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _merge(base: Any, over: Any, path: tuple[str, ...] = ()) -> Any:
    if isinstance(over, _Override):
        return _plain(over.value)
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            if value is RESET:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = _merge(merged[key], value, (*path[-1:], str(key)))
            else:
                merged[key] = _plain(value)
        return merged
    replaced = path[-1:] in _REPLACED or path[-2:] in _REPLACED
    if isinstance(base, list) and isinstance(over, list) and not replaced:
        return base + [v for v in _plain(over) if v not in base]
    return _plain(over)


def _interpolate(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, environ) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, default = match.group("name", "op", "default")
        current = environ.get(name)
        if op == ":-" and not current:
            return default
        if op == "-" and current is None:
            return default
        return current or ""

    return _VARIABLE.sub(one, value)


def load_compose(*files: Path, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The merged model of `files` (in order), interpolated from `environ`
    (default: nothing set, so every `${NAME:-default}` takes its default)."""
    model: dict[str, Any] = {}
    for path in files:
        loaded = yaml.load(path.read_text(), Loader=_ComposeLoader)  # a SafeLoader
        model = _merge(model, loaded or {})
    return dict(_interpolate(model, environ or {}))


def active_services(model: Mapping[str, Any], profiles: Iterable[str] = ()) -> dict[str, Any]:
    """The services `up` starts with `--profile` for each of `profiles`."""
    wanted = set(profiles)
    return {
        name: spec
        for name, spec in model["services"].items()
        if not spec.get("profiles") or wanted & set(spec["profiles"])
    }


def environment(spec: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment as strings (a mapping in this project's files)."""
    env = spec.get("environment") or {}
    assert isinstance(env, dict), "environment must be a mapping"
    return {str(k): "" if v is None else str(v) for k, v in env.items()}
