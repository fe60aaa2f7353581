"""This suite runs on both storage engines: SQLite (the embedded default) and PostgreSQL."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
