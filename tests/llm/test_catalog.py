"""Configured models are checked before start-up, naming the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.llm.catalog import ModelConfigError, check_models
from app.settings import ConfigError


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
