"""One `Settings` for the whole service, one group per concern: `settings.storage.db_path`,
`settings.model.name`, `settings.turns.busy_policy` (the groups, their defaults and what each
setting means: app/settings/groups.py).

Sources, the first that has a setting wins: keyword arguments, the environment (`HERMES_*`), an
optional YAML file (`HERMES_CONFIG`), the defaults. Every source names a setting as its
variable does, without the prefix and in lower case (`db_path`, `model`, `max_queued_turns`):
one mapping, `VARIABLES`, files each under its group. Bad values stop start-up with the
variable's name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from app.errors import ConfigError
from app.settings.checks import MASKING_KINDS, MASKING_MODES, PUBLIC_PATH_NAMES
from app.settings.groups import (
    DEFAULT_SYSTEM_PROMPT,
    PROJECT_ROOT,
    AuthSettings,
    BudgetSettings,
    ContextSettings,
    DemoSettings,
    Group,
    HandoffSettings,
    HttpSettings,
    KnowledgeSettings,
    LeaseSettings,
    MaskingSettings,
    McpSettings,
    MemorySettings,
    ModelSettings,
    NluSettings,
    ObservabilitySettings,
    RedisSettings,
    RetentionSettings,
    SessionSettings,
    StorageSettings,
    ToolSettings,
    TurnSettings,
    WorkflowSettings,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ENV_PREFIX",
    "GROUPS",
    "MASKING_KINDS",
    "MASKING_MODES",
    "PROJECT_ROOT",
    "PUBLIC_PATH_NAMES",
    "VARIABLES",
    "AuthSettings",
    "BudgetSettings",
    "ContextSettings",
    "DemoSettings",
    "HandoffSettings",
    "HttpSettings",
    "KnowledgeSettings",
    "LeaseSettings",
    "MaskingSettings",
    "McpSettings",
    "MemorySettings",
    "ModelSettings",
    "NluSettings",
    "ObservabilitySettings",
    "RedisSettings",
    "RetentionSettings",
    "SessionSettings",
    "Settings",
    "StorageSettings",
    "ToolSettings",
    "TurnSettings",
    "WorkflowSettings",
    "config_error",
    "describe_validation_error",
    "load_settings",
    "variable",
]

ENV_PREFIX = "HERMES_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", frozen=True, validate_default=True)

    storage: StorageSettings = Field(default_factory=StorageSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    masking: MaskingSettings = Field(default_factory=MaskingSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    turns: TurnSettings = Field(default_factory=TurnSettings)
    leases: LeaseSettings = Field(default_factory=LeaseSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    handoff: HandoffSettings = Field(default_factory=HandoffSettings)
    demo: DemoSettings = Field(default_factory=DemoSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    nlu: NluSettings = Field(default_factory=NluSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    workflow: WorkflowSettings = Field(default_factory=WorkflowSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)

    @model_validator(mode="before")
    @classmethod
    def _into_groups(cls, data: Any) -> Any:
        return into_groups(data) if isinstance(data, Mapping) else data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, Environment(settings_cls)]
        config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)


GROUPS: dict[str, type[Group]] = {
    name: field.annotation
    for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, Group)
}


def variable(name: str, field: FieldInfo) -> str:
    """A group field's variable name, lower case and without the prefix (`db_synchronous`)."""
    alias = field.validation_alias
    return alias if isinstance(alias, str) else name


# Variable name (lower case, no prefix) -> (group, field): the one map between the names the
# environment, the YAML file and keyword arguments use and where each setting lives.
VARIABLES: dict[str, tuple[str, str]] = {
    variable(name, field): (group, name)
    for group, model in GROUPS.items()
    for name, field in model.model_fields.items()
}
_FIELDS = {place: name for name, place in VARIABLES.items()}
assert len(_FIELDS) == len(VARIABLES), "two settings share a variable name"


def into_groups(data: Mapping[str, Any]) -> dict[str, Any]:
    """Flat variable names onto their groups: `{"db_path": p}` -> `{"storage": {"db_path": p}}`.
    A group given whole (a model, or a mapping in the YAML file) is kept; its own values win
    over flat ones. An unknown name stays at the top, where `extra="forbid"` names it."""
    grouped: dict[str, dict[str, Any]] = {}
    whole: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in data.items():
        if key in GROUPS and isinstance(value, Mapping | BaseModel):
            whole[key] = value  # `model` and `auth` are a group and a variable both
        elif key in VARIABLES:
            group, name = VARIABLES[key]
            grouped.setdefault(group, {})[name] = value
        else:
            rest[key] = value
    for group, value in whole.items():
        if group not in grouped:
            rest[group] = value
            continue
        given = (
            {name: getattr(value, name) for name in value.model_fields_set}
            if isinstance(value, BaseModel)
            else value
        )
        grouped[group].update(given)
    return {**rest, **grouped}


class Environment(PydanticBaseSettingsSource):
    """`HERMES_<VARIABLE>` for every variable in `VARIABLES`, matched without regard to case;
    raw strings (comma lists are split by their groups). Other `HERMES_*` variables are not
    settings (`HERMES_CONFIG`, the terminal client's) and are left alone."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything happens in __call__

    def __call__(self) -> dict[str, Any]:
        prefix = ENV_PREFIX.lower()
        env = {key.lower(): value for key, value in os.environ.items()}
        return {name: env[prefix + name] for name in VARIABLES if prefix + name in env}


def load_settings(**overrides: Any) -> Settings:
    """Build settings or raise `ConfigError` naming each bad variable."""
    config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if config_file and not Path(config_file).is_file():
        raise ConfigError(f"{ENV_PREFIX}CONFIG", f"no such file: {config_file}")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise config_error(exc) from None


def config_error(exc: ValidationError) -> ConfigError:
    """One bad variable: `"HERMES_X: why (got ...)"` on one line; several: one line each."""
    problems = describe_validation_error(exc)
    if len(problems) == 1:
        return ConfigError(*problems[0])
    names = ", ".join(dict.fromkeys(name for name, _ in problems))
    listed = "\n  ".join(f"{name}: {problem}" for name, problem in problems)
    return ConfigError(names, f"invalid configuration:\n  {listed}")


# Values never echoed in an error: they may hold credentials (a Redis URL's password).
_SECRET = frozenset(
    {
        "api_keys",
        "redis_url",
        "database_url",
        "auth_secret",
        "key_pepper",
        "jwt_secret",
        "model_api_key",
    }
)


def describe_validation_error(exc: ValidationError) -> list[tuple[str, str]]:
    """Each problem as (the variable, what is wrong with it)."""
    problems = []
    for err in exc.errors():
        name = _variable_at(err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown setting"
        got = err.get("input")
        secret = name.removeprefix(ENV_PREFIX).lower() in _SECRET
        plain = isinstance(got, str | int | float) and not secret
        problems.append((name, f"{message} (got {got!r})" if plain else message))
    return problems


def _variable_at(loc: tuple[int | str, ...]) -> str:
    """`("storage", "synchronous")` -> `HERMES_DB_SYNCHRONOUS`; a rule across a group's fields
    (its message names the variables) -> "configuration"."""
    if not loc:
        return "configuration"
    head = str(loc[0])
    if head not in GROUPS:
        return f"{ENV_PREFIX}{head.upper()}"  # not a setting at all
    if len(loc) == 1:
        return "configuration"
    field = str(loc[1])
    known = _FIELDS.get((head, field), field)  # by field name, or already the variable's
    return f"{ENV_PREFIX}{known.upper()}"
