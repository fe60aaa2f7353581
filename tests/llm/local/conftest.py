"""Fixtures for the offline-model tests.

LiteLLM builds pydantic schemas for TypedDicts with `ReadOnly` items the first time a Router
is built or called, and pydantic warns about each one; `filterwarnings = error` would turn that
into a failure of whichever test gets there first. Only that warning is silenced, only here.
(Proposed for pyproject's filterwarnings: see docs/offline-model.md.)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

_READ_ONLY = r"ignore:.*using the `ReadOnly` qualifier:UserWarning"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/llm/local/" in item.nodeid:
            item.add_marker(pytest.mark.filterwarnings(_READ_ONLY))


@pytest.fixture(autouse=True)
def _restore_custom_providers() -> Iterator[None]:
    """`register` changes LiteLLM's global provider map: leave it as the test found it."""
    before = sys.modules.get("litellm")
    saved = list(before.custom_provider_map) if before is not None else []
    yield
    after = sys.modules.get("litellm")
    if after is not None:
        after.custom_provider_map = saved
