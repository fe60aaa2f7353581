"""open_shop opens the demo shop the tools take as `ctx.deps`, and closes it after."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.backend import SHOP, ShopBackend, open_shop
from app.demo.fixtures import LI_LEI
from app.demo.mail import SmtpMailer
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


async def test_open_creates_the_file_on_first_use_and_the_end_closes_it(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    assert not settings.demo.db_path.exists()
    async with open_shop(settings) as shop:
        assert settings.demo.db_path.exists()
        store, mailer = shop.store, shop.mailer
        assert isinstance(store, DemoStore) and isinstance(mailer, SmtpMailer)
        assert (mailer.config.host, mailer.config.port) == ("127.0.0.1", 2525)
        assert (mailer.sender, mailer.config.timeout_s) == ("cs@example.com", 3)
        assert await store.customer("default", LI_LEI) is not None
    with pytest.raises(DatabaseClosed):
        await store.customer("default", LI_LEI)


async def test_a_mailer_override(tmp_path: Path) -> None:
    mailer = RecordingMailer()
    async with open_shop(settings_for(tmp_path), mailer=mailer) as shop:
        assert shop.mailer is mailer
        assert await shop.store.order_for("default", LI_LEI, "202405201235") is not None


async def test_the_provider_gives_the_type_the_handlers_ask_for(tmp_path: Path) -> None:
    assert SHOP.gives is ShopBackend
    async with SHOP.open(settings_for(tmp_path)) as shop:
        assert isinstance(shop, ShopBackend)
