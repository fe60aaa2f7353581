"""What the built-in call-centre tools need at run time, opened and closed as one unit.

services = await open_demo(settings)       # {"demo": DemoStore, "smtp": Mailer}
executor = ToolExecutor(registry, services=services)
...
await close_demo(services)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from app.demo.generator import ensure
from app.demo.mail import Mailer, SmtpConfig, SmtpMailer
from app.demo.store import DemoStore
from app.settings import Settings

DEMO = "demo"  # ctx.services key of the DemoStore
SMTP = "smtp"  # ctx.services key of the Mailer


async def open_demo(settings: Settings, *, mailer: Mailer | None = None) -> dict[str, Any]:
    """Create the demo file if it is missing (never overwrite it), open it, and return the
    services dict handlers read through `ctx.services`."""
    await asyncio.to_thread(ensure, settings.demo_db_path)
    store = await DemoStore(settings.demo_db_path, tenants=settings.demo_tenants).open()
    return {
        DEMO: store,
        SMTP: mailer if mailer is not None else SmtpMailer(SmtpConfig.from_settings(settings)),
    }


async def close_demo(services: Mapping[str, Any]) -> None:
    store = services.get(DEMO)
    if isinstance(store, DemoStore):
        await store.close()


@contextlib.asynccontextmanager
async def demo_services(
    settings: Settings, *, mailer: Mailer | None = None
) -> AsyncIterator[dict[str, Any]]:
    services = await open_demo(settings, mailer=mailer)
    try:
        yield services
    finally:
        await close_demo(services)
