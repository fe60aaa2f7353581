"""A real database (SQLite, or a fresh PostgreSQL database: every memory test runs on both),
a fixed clock, and the service over them."""

from __future__ import annotations

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

ALICE = Scope("acme", "alice")
BOB = Scope("acme", "bob")
OTHER_TENANT_ALICE = Scope("globex", "alice")


def memory_migrations() -> Path:
    """The schema memory needs: its own tables and the audit log its changes are written to
    (that is, every migration: the audit log's came with the approvals')."""
    return PROJECT_ROOT / "migrations"


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
    database = SqliteDatabase(tmp_path / "memory.db", migrations_dir=memory_migrations())
    await database.open()
    yield database
    await database.close()


@pytest.fixture
def memory(db: Database, clock: FixedClock) -> MemoryService:
    return MemoryService(db, clock=clock)
