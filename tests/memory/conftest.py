"""A real database (SQLite with the memory migrations, or a fresh PostgreSQL database: every
memory test runs on both), a fixed clock, and the service over them."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.memory.records import Scope
from app.memory.service import MemoryService
from app.memory.testing import FixedClock
from app.settings import PROJECT_ROOT
from app.storage.port import Database
from app.storage.sqlite import SqliteDatabase

MIGRATIONS = (
    PROJECT_ROOT / "migrations" / "0003_memory.sql",
    PROJECT_ROOT / "migrations" / "0007_memory_origin.sql",
)

ALICE = Scope("acme", "alice")
BOB = Scope("acme", "bob")
OTHER_TENANT_ALICE = Scope("globex", "alice")


def memory_migrations(tmp_path: Path) -> Path:
    """Only the memory migrations: these tests don't depend on other areas' schemas."""
    directory = tmp_path / "migrations"
    directory.mkdir(exist_ok=True)
    for migration in MIGRATIONS:
        shutil.copy(migration, directory / migration.name)
    return directory


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def db(tmp_path: Path, backend: str, open_db: Any) -> AsyncIterator[Database]:
    if backend == "postgres":
        yield await open_db()
        return
    database = SqliteDatabase(tmp_path / "memory.db", migrations_dir=memory_migrations(tmp_path))
    await database.open()
    yield database
    await database.close()


@pytest.fixture
def memory(db: Database, clock: FixedClock) -> MemoryService:
    return MemoryService(db, clock=clock)
