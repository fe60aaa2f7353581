"""The local PostgreSQL for tests: `pg_url` is a fresh database per test, dropped afterwards.

The server is `TEST_POSTGRES_URL` (default: the development machine's, trust auth). When it
cannot be reached the test is skipped, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

PG_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> psycopg.Connection:
    try:
        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL}: {exc}")


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped (with its connections) afterwards."""
    name = f"hermes_test_{uuid.uuid4().hex}"
    with _admin() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(PG_ADMIN_URL)._replace(path=f"/{name}").geturl()
    finally:
        with _admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url
