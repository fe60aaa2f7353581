"""The two paths a remote model can take, for tests that must hold on both.

`HERMES_MODEL_API=openai` sends `openai/test-model` to the direct client, `litellm` the same
model through LiteLLM; both against the real fake model server. A test module opts in with

    model_api = paths.model_api
    make_settings = paths.settings_on_path   # overrides conftest's make_settings

and marks the tests (or the module, `pytestmark = BOTH_PATHS`) that must pass on both paths;
unmarked tests run on the default path (`auto`, direct for `openai/…`). LiteLLM is imported
once per test process, by the first test on its path.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from app.llm.build import ChainOptions
from app.llm.catalog import ModelApi
from app.settings import Settings

MODEL_APIS = ("openai", "litellm")
BOTH_PATHS = pytest.mark.parametrize("model_api", MODEL_APIS, indirect=True)


@pytest.fixture
def model_api(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "auto"))


@pytest.fixture
def settings_on_path(make_settings: Any, model_api: str) -> Any:
    """`make_settings` with `model_api` set (a test's own `model_api=` still wins)."""
    return functools.partial(make_settings, model_api=model_api)


def chain_options(api: ModelApi = "auto", **changes: Any) -> ChainOptions:
    """The chain options a service with the default settings has, on `api`, changed by
    `changes`; masking off unless a test gives a policy (it masks what the fake model sees)."""
    defaults = ChainOptions.from_settings(Settings(model_api=api))
    return dataclasses.replace(defaults, **{"masking": None, **changes})
