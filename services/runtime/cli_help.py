"""The command line of every service process: `-h`/`--help` lists the
environment variables it reads, and anything else is refused.

The services take no arguments — every setting is an environment variable —
so a typo such as `--port 9000` must stop the process (exit status 2) rather
than start a server on the defaults. The help is generated from the settings
classes the process loads, like docs/configuration.md
(`scripts/gen_config_docs.py` uses `env_names` and `describe_setting` below):
a field added to a class shows up in both without further changes.

Only pydantic and the settings classes are imported, and only when help is
asked for: no model, store or port is touched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from types import NoneType, UnionType
from typing import Any, Literal, NoReturn, TypeGuard, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretBytes, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, NoDecode

from services.runtime.settings import _env_name

SettingsClasses = Callable[[], Sequence[type[BaseSettings]]]

# Section titles for the settings classes; an unknown class is titled by its name.
SECTION_TITLES = {
    "BaseServiceSettings": "Every service",
    "EmbeddingSettings": "Embedding model, shared by the Indexer and the Retriever",
    "StoreSettings": "Stores: embedded, or Qdrant and OpenSearch servers",
    "IndexerSettings": "Indexer",
    "RetrieverSettings": "Retriever",
    "RerankerSettings": "Reranker",
    "GatewaySettings": "Gateway",
}

HIDDEN = "(hidden)"  # a secret's default is never shown, not even masked


# -- what a settings class reads ---------------------------------------------


def env_names(cls: type[BaseSettings], own_only: bool = False) -> dict[str, FieldInfo]:
    """Environment variable name → field info for `cls` (optionally minus the
    fields of its settings base classes; a plain pydantic mixin's count as its own)."""
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
    return {
        _env_name(cls, field, prefix): info
        for field, info in cls.model_fields.items()
        if field not in inherited
    }


def settings_sections(
    classes: Iterable[type[BaseSettings]],
) -> list[tuple[type[BaseModel], dict[str, FieldInfo]]]:
    """Every variable `classes` read, grouped by the class that declares it.

    The classes given come first (their own fields), then their plain pydantic
    mixins (e.g. the client settings of a service they call), then their
    settings bases from the most derived; a base shared by several classes is
    listed once. Nothing is left out: a field belongs to the most basic class
    that declares it, described as the loaded class sees it (a default a
    subclass overrides included)."""
    classes = list(classes)
    order: list[type[BaseModel]] = list(classes)
    for cls in classes:
        order += [base for base in cls.__mro__[1:] if _is_settings(base) and base not in order]
    # sorted() is stable: within each kind, the order above is kept
    order.sort(key=lambda owner: owner not in classes and issubclass(owner, BaseSettings))
    sections: dict[type[BaseModel], dict[str, FieldInfo]] = {owner: {} for owner in order}
    seen: set[str] = set()
    for cls in classes:
        prefix = str(cls.model_config.get("env_prefix", ""))
        for field, info in cls.model_fields.items():
            name = _env_name(cls, field, prefix)
            if name not in seen:
                seen.add(name)
                sections[_declaring_class(cls, field)][name] = info
    return [(owner, fields) for owner, fields in sections.items() if fields]


def _is_settings(cls: object) -> TypeGuard[type[BaseModel]]:
    return (
        isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls not in (BaseModel, BaseSettings)
        and bool(cls.model_fields)
    )


def _declaring_class(cls: type[BaseSettings], field: str) -> type[BaseModel]:
    bases = [base for base in cls.__mro__ if _is_settings(base) and field in base.model_fields]
    return bases[-1]


# -- one setting --------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One environment variable, described from its field."""

    name: str
    type: str
    default: str | None  # None: unset (no default value); a secret's is HIDDEN
    computed: bool  # the default is made by a factory when the settings load
    required: bool  # no default: the variable must be set
    allowed: str  # bounds, pattern or choices; "" when any value of the type goes
    description: str
    secret: bool


def describe_setting(name: str, info: FieldInfo) -> Setting:
    annotation = info.annotation
    secret = _is_secret(annotation)
    return Setting(
        name=name,
        type=_type_text(annotation, info),
        default=_default_text(info, secret),
        computed=info.default_factory is not None,
        required=info.is_required(),
        allowed=_allowed_text(annotation, info),
        description=" ".join((info.description or "").split()),
        secret=secret,
    )


def _members(annotation: Any) -> list[Any]:
    """The types of a union (None left out), or the annotation itself."""
    if get_origin(annotation) in (Union, UnionType):
        return [arg for arg in get_args(annotation) if arg is not NoneType]
    return [annotation]


def _is_secret(annotation: Any) -> bool:
    return any(
        isinstance(member, type) and issubclass(member, SecretStr | SecretBytes)
        for member in _members(annotation)
    )


def _type_text(annotation: Any, info: FieldInfo) -> str:
    return " | ".join(_one_type_text(member, info) for member in _members(annotation))


_TYPE_NAMES: dict[Any, str] = {bool: "bool", int: "int", float: "float", str: "string"}


def _one_type_text(tp: Any, info: FieldInfo) -> str:
    origin = get_origin(tp)
    if tp in _TYPE_NAMES:
        return _TYPE_NAMES[tp]
    if origin is Literal or (isinstance(tp, type) and issubclass(tp, Enum)):
        return "choice"
    if isinstance(tp, type) and issubclass(tp, SecretStr | SecretBytes):
        return "secret"
    if isinstance(tp, type) and issubclass(tp, PurePath):
        return "path"
    if origin in (list, tuple, set, frozenset):
        return "comma-separated list" if _no_decode(info) else "JSON list"
    if origin is dict:
        return "JSON object"
    return str(getattr(tp, "__name__", tp))


def _no_decode(info: FieldInfo) -> bool:
    return any(item is NoDecode or isinstance(item, NoDecode) for item in info.metadata)


def _default_text(info: FieldInfo, secret: bool) -> str | None:
    if info.default_factory is not None:
        return None
    value = info.default
    if (
        value is PydanticUndefined
        or value in (None, "")
        or (secret and _secret_value(value) in (None, ""))
    ):
        return None
    if secret:
        return HIDDEN
    return str(value.value if isinstance(value, Enum) else value)


def _secret_value(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr | SecretBytes) else value


def _allowed_text(annotation: Any, info: FieldInfo) -> str:
    parts: list[str] = []
    choices = _choices(annotation)
    if choices:
        parts.append("one of " + ", ".join(choices))
    low: str | None = None
    high: str | None = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f">= {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            low = f"> {item.gt}"
        elif isinstance(item, annotated_types.Le):
            high = f"<= {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {item.lt}"
        elif isinstance(item, annotated_types.MinLen):
            parts.append(f"length >= {item.min_length}")
        elif isinstance(item, annotated_types.MaxLen):
            parts.append(f"length <= {item.max_length}")
        elif isinstance(item, annotated_types.MultipleOf):
            parts.append(f"multiple of {item.multiple_of}")
        elif (pattern := getattr(item, "pattern", None)) is not None:
            parts.append(f"pattern {pattern}")
    if low and high and low.startswith(">=") and high.startswith("<="):
        parts.insert(0, f"{low[3:]}..{high[3:]}")
    else:
        parts[:0] = [bound for bound in (low, high) if bound]
    return "; ".join(parts)


def _choices(annotation: Any) -> list[str]:
    choices: list[str] = []
    for member in _members(annotation):
        if get_origin(member) is Literal:
            choices += [str(arg) for arg in get_args(member)]
        elif isinstance(member, type) and issubclass(member, Enum):
            choices += [str(item.value) for item in member]
    return choices


# -- the help text --------------------------------------------------------------


def render_help(classes: Iterable[type[BaseSettings]], width: int = 100) -> str:
    """The environment variables `classes` read, one section per settings class."""
    lines = ["environment variables (secret values are never shown):"]
    for owner, fields in settings_sections(classes):
        lines += ["", f"{_section_title(owner)}:"]
        for name, info in fields.items():
            lines += _setting_lines(describe_setting(name, info), info, width)
    return "\n".join(lines) + "\n"


def _section_title(owner: type[BaseModel]) -> str:
    name = owner.__name__
    if name in SECTION_TITLES:
        return f"{SECTION_TITLES[name]} ({name})"
    if name.endswith("ClientSettings") and name != "ClientSettings":
        return f"Calls to the {name.removesuffix('ClientSettings')} ({name})"
    return name


def _setting_lines(setting: Setting, info: FieldInfo, width: int) -> list[str]:
    facts = [setting.type, _cli_default(setting, info)]
    if setting.allowed:
        facts.append(setting.allowed)
    head = textwrap.wrap(
        f"{setting.name}  " + "; ".join(facts),
        width,
        initial_indent="  ",
        subsequent_indent="      ",
        break_on_hyphens=False,
    )
    body = textwrap.wrap(
        setting.description, width, initial_indent="      ", subsequent_indent="      "
    )
    return head + body


def _cli_default(setting: Setting, info: FieldInfo) -> str:
    if setting.required:
        return "required (no default)"
    if setting.computed and info.default_factory in (list, tuple, set, frozenset, dict):
        return "default empty"
    if setting.computed:
        value = _factory_value(info, setting.secret)
        return "default computed at start-up" + (f": {value}" if value is not None else "")
    if info.default == "":
        return "default empty"
    if setting.default is None:
        return "default unset"
    if bool in _members(info.annotation) and isinstance(info.default, bool):
        return f"default {setting.default.lower()}"
    if isinstance(info.default, str) and (
        " " in setting.default or setting.default.strip() != setting.default
    ):
        return "default " + json.dumps(setting.default, ensure_ascii=False)
    return f"default {setting.default}"


def _factory_value(info: FieldInfo, secret: bool) -> str | None:
    """What the default factory makes now (e.g. a folder under $XDG_DATA_HOME)."""
    factory = info.default_factory
    if secret or factory is None or info.default_factory_takes_validated_data:
        return None
    try:
        value = factory()  # type: ignore[call-arg]
    except Exception:
        return None
    if isinstance(value, list | tuple | set | frozenset):
        if not value:
            return "empty"
        items = [str(item) for item in value]
        return ",".join(items) if _no_decode(info) else json.dumps(items)
    return str(value.value if isinstance(value, Enum) else value)


# -- the command line -----------------------------------------------------------


class _HelpAction(argparse.Action):
    """`-h`: render the variables only now, so that a normal start imports nothing extra."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.settings: SettingsClasses = kwargs.pop("settings")
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        parser.print_help()
        print()
        print(render_help(self.settings(), width=_width()), end="")
        parser.exit(0)


def _width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 24)).columns - 2, 100))


def parse_command_line(
    prog: str, summary: str, settings: SettingsClasses, argv: Sequence[str] | None = None
) -> None:
    """Answer `-h`/`--help` (exit 0) and refuse any other argument (exit 2).

    `summary` says what the module runs; `settings` returns the settings
    classes the process loads (called only for the help, so imports can wait).
    """
    parser = _Parser(
        prog=prog,
        description=(
            f"{summary}\n\nIt takes no arguments: it is configured by the environment "
            "variables below, checked when it starts (a bad value stops it with exit "
            "status 2 and a message naming the variable)."
        ),
        formatter_class=_Formatter,
        add_help=False,
    )
    parser.add_argument(
        "-h",
        "--help",
        action=_HelpAction,
        settings=settings,
        help="show this help, with every environment variable read, and exit",
    )
    parser.parse_args(sys.argv[1:] if argv is None else list(argv))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        super().error(
            f"{message} (it takes no arguments: settings are environment variables, "
            "listed by --help)"
        )


class _Formatter(argparse.HelpFormatter):
    """Wraps each paragraph of the description to the terminal width."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_width())

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent)
            for paragraph in text.split("\n\n")
        )
