"""The current date and time, so the model can resolve "tomorrow" or "last Friday"."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.errors import ToolHandlerError
from app.tools.context import ToolContext


async def current_time(ctx: ToolContext[None], timezone: str = "Asia/Shanghai") -> dict[str, Any]:
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # "Asia" is a directory of the tz database, a 300-character name is too long for the
        # file system: both are bad input, not a broken clock.
        shown = timezone if len(timezone) <= 64 else timezone[:61] + "..."
        raise ToolHandlerError(
            "unknown_timezone", f"unknown time zone {shown!r}; use an IANA name like Asia/Shanghai"
        ) from None
    now = datetime.now(zone)
    return {
        "timezone": timezone,
        "iso": now.isoformat(timespec="seconds"),
        "date": now.date().isoformat(),
        "weekday": now.strftime("%A"),
    }
