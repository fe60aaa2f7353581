"""A real database for the knowledge base (a SQLite file, or a fresh PostgreSQL database: the
store's tests run on both), a clock that moves only when told, and the base over them."""

from __future__ import annotations

from typing import Any

import pytest

from app.knowledge.service import KnowledgeBase
from app.memory.testing import FixedClock
from app.settings import KnowledgeSettings
from app.storage.port import Database


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def db(open_db: Any) -> Database:
    database: Database = await open_db("knowledge.db")
    return database


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def kb(db: Database, clock: FixedClock) -> KnowledgeBase:
    return KnowledgeBase(db, KnowledgeSettings(max_document_bytes=64 * 1024), clock=clock)
