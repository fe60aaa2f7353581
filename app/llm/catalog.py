"""The configured models: what each is, and whether Hermes can serve it at all.

Checked before the server binds, so a typo in `HERMES_MODEL` is one line naming the variable,
not a traceback from the first turn. `hermes/...` names are Hermes' own and need no LiteLLM;
anything else is checked against LiteLLM's providers, imported only then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.settings import ConfigError

LOCAL_PROVIDER = "hermes"
LOCAL_MODEL = f"{LOCAL_PROVIDER}/local"  # the only model of the hermes provider


class ModelConfigError(ConfigError):
    """A configured model can't be served; the message names the variable."""


@dataclass(frozen=True)
class ModelConfig:
    """One model the chain may use: a model string and where to reach it."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def check_models(primary: str, fallbacks: list[str]) -> None:
    """Raise `ModelConfigError` for the first model Hermes can't serve."""
    check_model(primary, "HERMES_MODEL")
    for name in fallbacks:
        check_model(name, "HERMES_FALLBACK_MODELS")


def check_model(name: str, variable: str) -> None:
    provider, _, model = name.partition("/")
    if provider == LOCAL_PROVIDER:
        if name != LOCAL_MODEL:
            raise ModelConfigError(
                f"{variable}: unknown model {name!r}; the only hermes/ model is {LOCAL_MODEL}"
            )
        return
    if "/" in name and not model:
        raise ModelConfigError(f"{variable}: {name!r} names a provider but no model")
    from app.llm.litellm_gateway import import_litellm

    litellm = import_litellm()
    try:
        litellm.get_llm_provider(name)
    except Exception:
        raise ModelConfigError(
            f"{variable}: unknown model provider in {name!r}; write provider/model,"
            f" e.g. openai/gpt-4o-mini, or {LOCAL_MODEL} to run offline"
        ) from None
