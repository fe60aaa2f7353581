"""The configured models: which path serves each, and whether Hermes can serve it at all.

Which path a model takes (`HERMES_MODEL_API`; fallbacks follow the same rule):

- `hermes/local` is always Hermes' own offline model, in-process (`app.llm.local.model`).
- `auto` (the default): `openai/…` and the OpenAI-compatible providers of `COMPATIBLE` go to the
  direct client (`app.llm.openai_compat`); any other provider goes to LiteLLM.
- `openai`: every model goes direct; a provider that isn't OpenAI-compatible is refused (write
  `openai/<model>` with `HERMES_MODEL_API_BASE` for any server that speaks the OpenAI API).
- `litellm`: every remote model goes through LiteLLM.

LiteLLM is imported only for a model that takes its path. Everything here is checked before the
server binds, so a typo in `HERMES_MODEL` is one line naming the variable, not a traceback from
the first turn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from app.errors import ModelConfigError

LOCAL_PROVIDER = "hermes"
LOCAL_MODEL = f"{LOCAL_PROVIDER}/local"  # the only model of the hermes provider

ModelApi = Literal["auto", "openai", "litellm"]


@dataclass(frozen=True)
class ModelConfig:
    """One model the chain may use: a model string and where to reach it."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Compatible:
    base: str | None  # the provider's own endpoint; None: a self-hosted server, base required
    needs_key: bool


# Providers whose chat API is OpenAI's. Their key and base may also come from the variables
# LiteLLM reads (`DEEPSEEK_API_KEY`, `HOSTED_VLLM_API_BASE`, …), so both paths take the same
# configuration. Ollama, vLLM and llama.cpp servers speak it too: `openai/<model>` with
# `HERMES_MODEL_API_BASE` pointing at their `/v1`.
COMPATIBLE: dict[str, _Compatible] = {
    "openai": _Compatible("https://api.openai.com/v1", needs_key=True),
    "deepseek": _Compatible("https://api.deepseek.com/v1", needs_key=True),
    "dashscope": _Compatible("https://dashscope.aliyuncs.com/compatible-mode/v1", needs_key=True),
    "hosted_vllm": _Compatible(None, needs_key=False),
    "lm_studio": _Compatible("http://localhost:1234/v1", needs_key=False),
    "llamafile": _Compatible("http://127.0.0.1:8080/v1", needs_key=False),
}


@dataclass(frozen=True)
class Local:
    """`hermes/local`."""


@dataclass(frozen=True)
class Direct:
    """An OpenAI-compatible endpoint, called without LiteLLM."""

    base_url: str
    wire_model: str  # the model string without its provider, as the server knows it
    api_key: str | None
    needs_key: bool


@dataclass(frozen=True)
class ViaLiteLLM:
    """A provider only LiteLLM serves (or any, with HERMES_MODEL_API=litellm)."""


Route = Local | Direct | ViaLiteLLM


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def route(config: ModelConfig, api: ModelApi = "auto", variable: str = "HERMES_MODEL") -> Route:
    """The path `config` takes; `ModelConfigError` naming `variable` if there is none."""
    name = config.model
    provider, _, model = name.partition("/")
    if provider == LOCAL_PROVIDER:
        if name != LOCAL_MODEL:
            raise ModelConfigError(
                variable, f"unknown model {name!r}; the only hermes/ model is {LOCAL_MODEL}"
            )
        return Local()
    if "/" in name and not model:
        raise ModelConfigError(variable, f"{name!r} names a provider but no model")
    compatible = COMPATIBLE.get(provider) if "/" in name else None
    if api == "litellm" or (api == "auto" and compatible is None):
        _check_litellm(name, variable)
        return ViaLiteLLM()
    if compatible is None:
        raise ModelConfigError(
            variable,
            f"{name!r} is not an OpenAI-compatible provider"
            f" ({', '.join(sorted(COMPATIBLE))}); with HERMES_MODEL_API=openai write"
            " openai/<model> and HERMES_MODEL_API_BASE, or set HERMES_MODEL_API=auto",
        )
    env = provider.upper()
    base = config.api_base or os.environ.get(f"{env}_API_BASE") or compatible.base
    if not base:
        raise ModelConfigError(
            variable, f"{name!r} needs HERMES_MODEL_API_BASE (the server's /v1 URL)"
        )
    key = config.api_key or os.environ.get(f"{env}_API_KEY") or None
    return Direct(base.rstrip("/"), model, key, compatible.needs_key)


def routes(
    primary: ModelConfig | str, fallbacks: list[ModelConfig] | list[str], api: ModelApi = "auto"
) -> list[Route]:
    """The route of each model, primary first; raises for the first model Hermes can't serve."""
    found = [route(_config(primary), api, "HERMES_MODEL")]
    found += [route(_config(f), api, "HERMES_FALLBACK_MODELS") for f in fallbacks]
    return found


def check_models(
    primary: ModelConfig | str, fallbacks: list[ModelConfig] | list[str], api: ModelApi = "auto"
) -> None:
    """Raise `ModelConfigError` for the first model Hermes can't serve."""
    routes(primary, fallbacks, api)


def with_local_fallback(primary: ModelConfig, fallbacks: list[ModelConfig]) -> list[ModelConfig]:
    """`fallbacks` with `hermes/local` last, unless the local model is already in the chain."""
    if LOCAL_MODEL in {primary.model, *(f.model for f in fallbacks)}:
        return list(fallbacks)
    return [*fallbacks, ModelConfig(LOCAL_MODEL)]


def _config(value: ModelConfig | str) -> ModelConfig:
    return value if isinstance(value, ModelConfig) else ModelConfig(value)


def _check_litellm(name: str, variable: str) -> None:
    from app.llm.litellm_gateway import import_litellm

    litellm = import_litellm()
    try:
        litellm.get_llm_provider(name)
    except Exception:
        raise ModelConfigError(
            variable,
            f"unknown model provider in {name!r}; write provider/model,"
            f" e.g. openai/gpt-4o-mini, or {LOCAL_MODEL} to run offline",
        ) from None
