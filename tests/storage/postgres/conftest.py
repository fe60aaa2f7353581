"""PostgreSQL fixtures for these tests: `pg_url` (a fresh database per test) and a connection."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres import pg_url

__all__ = ["pg", "pg_url"]


@pytest.fixture
def pg(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def backend() -> str:
    """Not parametrised: these tests open PostgreSQL themselves (`pg_url`), and a service they
    start (`make_settings`) writes the SQLite file the copy tests read."""
    return "sqlite"
