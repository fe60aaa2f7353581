"""Which database the settings choose, and one clear line when PostgreSQL can't be used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.errors import ConfigError
from app.settings import Settings
from app.storage.engine import check_database, database_for, open_database
from app.storage.postgres.database import PostgresDatabase
from app.storage.sqlite import SqliteDatabase
from tests.test_cli import run_hermes


@pytest.fixture
def backend() -> str:
    return "sqlite"  # these tests pick their URLs themselves


def settings_with(tmp_path: Path, url: str | None) -> Settings:
    return Settings(db_path=tmp_path / "h.db", database_url=url, db_connect_timeout_s=2)


def test_sqlite_unless_a_postgresql_url_is_given(tmp_path: Path, pg_url: str) -> None:
    assert isinstance(database_for(settings_with(tmp_path, None)), SqliteDatabase)
    assert isinstance(database_for(settings_with(tmp_path, pg_url)), PostgresDatabase)


async def test_postgres_opens_migrated_and_answers(tmp_path: Path, pg_url: str) -> None:
    db = await open_database(settings_with(tmp_path, pg_url))
    try:
        assert db.dialect == "postgres"
        assert "0001_init" in " ".join(db.applied_migrations)
        await db.ping()
    finally:
        await db.close()


BAD_URLS = [
    # nothing listens on port 1
    ("postgresql://postgres:s3cret-pw@127.0.0.1:1/hermes", "127.0.0.1:1/hermes"),
    # a role that does not exist: the server refuses the credentials
    ("postgresql://no_such_role:s3cret-pw@127.0.0.1:5432/postgres", "no_such_role"),
    # a database that does not exist
    ("postgresql://postgres:s3cret-pw@127.0.0.1:5432/hermes_missing_db", "hermes_missing_db"),
]


@pytest.mark.parametrize(("url", "named"), BAD_URLS)
async def test_an_unusable_database_is_one_line_naming_the_variable(
    tmp_path: Path, url: str, named: str, pg_url: str
) -> None:
    settings = settings_with(tmp_path, url)
    for attempt in (lambda: check_database(settings), None):
        with pytest.raises(ConfigError) as caught:
            if attempt is not None:
                attempt()
            else:
                await open_database(settings)
        message = str(caught.value)
        assert caught.value.source == "HERMES_DATABASE_URL"
        assert "\n" not in message and named in message
        assert "s3cret-pw" not in message


def test_a_url_that_is_not_postgresql_is_refused_by_name(tmp_path: Path) -> None:
    from app.settings import load_settings

    with pytest.MonkeyPatch.context() as env:
        env.setenv("HERMES_DATABASE_URL", "mysql://root@127.0.0.1/hermes")
        with pytest.raises(ConfigError, match="HERMES_DATABASE_URL"):
            load_settings()


def test_hermes_serve_stops_in_one_line_when_postgresql_is_unreachable(
    tmp_path: Path, pg_url: Any
) -> None:
    result = run_hermes(
        "serve",
        "--port",
        "0",
        HERMES_DATABASE_URL="postgresql://postgres:s3cret-pw@127.0.0.1:1/hermes",
        HERMES_DB_CONNECT_TIMEOUT_S="2",
        HERMES_DB_PATH=str(tmp_path / "h.db"),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HERMES_DATABASE_URL" in lines[0], result.stderr
    assert "s3cret-pw" not in result.stderr
