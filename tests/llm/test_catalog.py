"""Which path each configured model takes, and the checks before start-up that name the
variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.errors import ConfigError, ModelConfigError
from app.llm.catalog import (
    Direct,
    Local,
    ModelApi,
    ModelConfig,
    Route,
    ViaLiteLLM,
    check_models,
    route,
)


@pytest.mark.parametrize(
    ("primary", "fallbacks", "variable"),
    [
        ("bogus-model-xyz", [], "HERMES_MODEL"),
        ("hermes/bogus", [], "HERMES_MODEL"),
        ("openai/", [], "HERMES_MODEL"),
        ("openai/gpt-4o-mini", ["nope/x"], "HERMES_FALLBACK_MODELS"),
        ("hermes/local", ["openai/a", "hermes/other"], "HERMES_FALLBACK_MODELS"),
    ],
)
def test_unknown_models_are_refused_by_variable(
    primary: str, fallbacks: list[str], variable: str
) -> None:
    with pytest.raises(ModelConfigError) as info:
        check_models(primary, fallbacks)
    assert str(info.value).startswith(f"{variable}: ")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_known_models_pass() -> None:
    check_models("openai/gpt-4o-mini", ["anthropic/claude-3-5-haiku", "gpt-4o", "hermes/local"])


def test_an_offline_configuration_is_checked_without_litellm() -> None:
    code = (
        "import sys\n"
        "from app.llm.catalog import check_models\n"
        "check_models('hermes/local', [])\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("model", "api", "expected"),
    [
        ("hermes/local", "auto", Local()),
        ("hermes/local", "litellm", Local()),
        (
            "openai/gpt-4o-mini",
            "auto",
            Direct("https://api.openai.com/v1", "gpt-4o-mini", "k", True),
        ),
        ("openai/gpt-4o-mini", "litellm", ViaLiteLLM()),
        (
            "deepseek/deepseek-chat",
            "auto",
            Direct("https://api.deepseek.com/v1", "deepseek-chat", "k", True),
        ),
        (
            "dashscope/qwen-plus",
            "openai",
            Direct("https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus", "k", True),
        ),
        ("anthropic/claude-3-5-haiku", "auto", ViaLiteLLM()),
        ("gpt-4o", "auto", ViaLiteLLM()),  # no provider: LiteLLM knows which it is
    ],
)
def test_which_path_a_model_takes(model: str, api: ModelApi, expected: Route) -> None:
    assert route(ModelConfig(model, api_key="k"), api) == expected


def test_a_configured_base_wins_and_the_wire_name_keeps_everything_after_the_provider() -> None:
    found = route(ModelConfig("openai/qwen2.5:7b", "http://127.0.0.1:11434/v1/", "k"))
    assert found == Direct("http://127.0.0.1:11434/v1", "qwen2.5:7b", "k", True)
    gateway = route(ModelConfig("openai/anthropic/claude-3-5-haiku", "http://gw/v1", "k"))
    assert isinstance(gateway, Direct) and gateway.wire_model == "anthropic/claude-3-5-haiku"


def test_key_and_base_fall_back_to_the_providers_own_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-env")
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", "http://vllm:8000/v1")
    deepseek = route(ModelConfig("deepseek/deepseek-chat"))
    assert isinstance(deepseek, Direct) and deepseek.api_key == "sk-from-env"
    assert route(ModelConfig("deepseek/deepseek-chat", api_key="sk-hermes")) == Direct(
        "https://api.deepseek.com/v1", "deepseek-chat", "sk-hermes", True
    )
    assert route(ModelConfig("hosted_vllm/qwen")) == Direct(
        "http://vllm:8000/v1", "qwen", None, False
    )


@pytest.mark.parametrize(
    ("primary", "fallbacks", "api", "variable", "says"),
    [
        ("hosted_vllm/qwen", [], "auto", "HERMES_MODEL", "needs HERMES_MODEL_API_BASE"),
        ("anthropic/claude-3-5-haiku", [], "openai", "HERMES_MODEL", "HERMES_MODEL_API=openai"),
        ("openai/a", ["gpt-4o"], "openai", "HERMES_FALLBACK_MODELS", "not an OpenAI-compatible"),
    ],
)
def test_a_model_the_chosen_path_cannot_serve_is_refused_in_one_line(
    primary: str,
    fallbacks: list[str],
    api: ModelApi,
    variable: str,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HOSTED_VLLM_API_BASE", raising=False)
    with pytest.raises(ModelConfigError) as info:
        check_models(primary, fallbacks, api)
    assert str(info.value).startswith(f"{variable}: ") and says in str(info.value)
    assert "\n" not in str(info.value)


def test_direct_and_offline_models_are_checked_without_litellm() -> None:
    code = (
        "import sys\n"
        "from app.llm.catalog import check_models\n"
        "check_models('openai/gpt-4o-mini', ['deepseek/deepseek-chat', 'hermes/local'])\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
