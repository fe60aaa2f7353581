"""Handlers run against a real demo SQLite file in tmp_path and a real SMTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.demo.backend import ShopBackend, open_shop
from app.demo.fixtures import LI_LEI
from app.demo.generator import regenerate
from app.demo.mail import SmtpMailer
from app.demo.store import DemoStore
from app.demo.testing import SmtpSink
from app.settings import PROJECT_ROOT, Settings
from app.storage.session_writer import SessionWriter
from app.tools.context import ToolContext, TurnScope
from app.tools.loader import load_tools
from app.tools.spec import ToolSpec
from app.tools.validation import output_problems

_SPECS: dict[str, ToolSpec] = {s.name: s for s in load_tools(PROJECT_ROOT / "tools.yaml")}


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    with SmtpSink() as sink:
        yield sink


@pytest.fixture
def demo_path(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    regenerate(path)
    return path


@pytest.fixture
async def shop(demo_path: Path, smtp_sink: SmtpSink) -> AsyncIterator[ShopBackend]:
    settings = Settings(
        db_path=demo_path.parent / "hermes.db",
        demo_db_path=demo_path,
        smtp_host=smtp_sink.host,
        smtp_port=smtp_sink.port,
        smtp_timeout_s=5,
    )
    async with open_shop(settings) as opened:
        assert isinstance(opened.mailer, SmtpMailer)
        yield opened


@pytest.fixture
def store(shop: ShopBackend) -> DemoStore:
    return shop.store


Ctx = Callable[..., ToolContext[ShopBackend]]


@pytest.fixture
def ctx(shop: ShopBackend) -> Ctx:
    """`ctx(user_id=..., key=...)`: the context the executor would pass for one call."""

    def make(
        user_id: str = LI_LEI, key: str = "idem_test_0001", tool: str = "t"
    ) -> ToolContext[ShopBackend]:
        scope = TurnScope(
            "default",
            user_id,
            "sess_test",
            "turn_test",
            "trace_test",
            writer=SessionWriter("sess_test"),
        )
        return ToolContext(scope, "call_1", tool, key, shop)

    return make


def conforms(tool: str, data: Any) -> None:
    """The handler's answer matches the output_schema declared in tools.yaml."""
    schema = _SPECS[tool].output_schema
    assert schema is not None
    assert output_problems(data, schema) == []


def count(path: Path, sql: str, *params: Any) -> int:
    """A count straight from the file, through a connection of our own."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {sql}", params).fetchone()[0])
    finally:
        conn.close()
