"""What the built-in call-centre tools need at run time, opened and closed as one unit.

services = await open_demo(settings)       # DemoServices(store, mailer)
executor = ToolExecutor(registry, services=services)
...
await close_demo(services)
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


@dataclass(frozen=True)
class DemoServices:
    """The backends built-in handlers reach through `ctx.services`, typed: the order system
    (`DemoStore`) and outgoing email (`Mailer`)."""

    store: DemoStore
    mailer: Mailer


async def open_demo(settings: Settings, *, mailer: Mailer | None = None) -> DemoServices:
    """Create the demo file if it is missing (never overwrite it), open it, and return the
    services handlers read through `ctx.services`."""
    await asyncio.to_thread(ensure, settings.demo_db_path)
    store = await DemoStore(settings.demo_db_path, tenants=settings.demo_tenants).open()
    return DemoServices(
        store, mailer if mailer is not None else SmtpMailer(SmtpConfig.from_settings(settings))
    )


async def close_demo(services: DemoServices) -> None:
    await services.store.close()


@contextlib.asynccontextmanager
async def demo_services(
    settings: Settings, *, mailer: Mailer | None = None
) -> AsyncIterator[DemoServices]:
    services = await open_demo(settings, mailer=mailer)
    try:
        yield services
    finally:
        await close_demo(services)
