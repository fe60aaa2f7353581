"""open_demo builds the typed services handlers read through ctx.services."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.fixtures import LI_LEI
from app.demo.mail import SmtpMailer
from app.demo.services import close_demo, demo_services, open_demo
from app.demo.store import DemoStore
from app.demo.testing import RecordingMailer
from app.errors import DatabaseClosed
from app.settings import Settings


def settings_for(tmp_path: Path) -> Settings:
    return Settings(
        db_path=tmp_path / "hermes.db",
        demo_db_path=tmp_path / "var" / "demo.db",
        smtp_host="127.0.0.1",
        smtp_port=2525,
        smtp_from="cs@example.com",
        smtp_timeout_s=3,
    )


async def test_open_creates_the_file_on_first_use_and_close_closes(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    assert not settings.demo_db_path.exists()
    services = await open_demo(settings)
    try:
        assert settings.demo_db_path.exists()
        store, mailer = services.store, services.mailer
        assert isinstance(store, DemoStore) and isinstance(mailer, SmtpMailer)
        assert (mailer.config.host, mailer.config.port) == ("127.0.0.1", 2525)
        assert (mailer.sender, mailer.config.timeout_s) == ("cs@example.com", 3)
        assert await store.customer("default", LI_LEI) is not None
    finally:
        await close_demo(services)
    with pytest.raises(DatabaseClosed):
        await store.customer("default", LI_LEI)


async def test_context_manager_and_a_mailer_override(tmp_path: Path) -> None:
    mailer = RecordingMailer()
    async with demo_services(settings_for(tmp_path), mailer=mailer) as services:
        assert services.mailer is mailer
        store = services.store
        assert await store.order_for("default", LI_LEI, "202405201235") is not None
