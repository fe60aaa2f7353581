"""The demo shop as its tools see it, and how it is opened: one provider of a dependency
(app/tools/deps.py), listed in tools.yaml as `app.demo.backend:SHOP`.

    async with open_shop(settings) as shop:   # ShopBackend(store, mailer)
        deps = Dependencies({ShopBackend: shop})   # the executor's `deps` (app/runtime/)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from app.demo.generator import ensure
from app.demo.mail import Mailer, SmtpConfig, SmtpMailer
from app.demo.store import DemoStore
from app.settings import Settings
from app.tools.deps import Provider


@dataclass(frozen=True)
class ShopBackend:
    """What the demo's handlers reach through `ctx.deps`, typed: the order system
    (`DemoStore`) and outgoing email (`Mailer`)."""

    store: DemoStore
    mailer: Mailer


@contextlib.asynccontextmanager
async def open_shop(
    settings: Settings, *, mailer: Mailer | None = None
) -> AsyncIterator[ShopBackend]:
    """Create the demo file if it is missing (never overwrite it), open it for the block."""
    await asyncio.to_thread(ensure, settings.demo.db_path)
    store = await DemoStore(settings.demo.db_path, tenants=settings.demo.tenants).open()
    try:
        yield ShopBackend(
            store,
            mailer if mailer is not None else SmtpMailer(SmtpConfig.from_settings(settings.demo)),
        )
    finally:
        await store.close()


SHOP: Provider[ShopBackend] = Provider(ShopBackend, open_shop)
