"""The current date and time, so the model can resolve "tomorrow" or "last Friday"."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.tools.context import ToolContext
from app.tools.handlers import ToolHandlerError


async def current_time(ctx: ToolContext, timezone: str = "Asia/Shanghai") -> dict[str, Any]:
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolHandlerError("unknown_timezone", f"unknown time zone {timezone!r}") from None
    now = datetime.now(zone)
    return {
        "timezone": timezone,
        "iso": now.isoformat(timespec="seconds"),
        "date": now.date().isoformat(),
        "weekday": now.strftime("%A"),
    }
