"""Tool handlers for executor tests: they record what ran, when, and can be told to misbehave."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from app.errors import ToolHandlerError
from app.tools.context import ToolContext


@dataclass
class Recorder:
    log: list[tuple[str, str, float]] = field(default_factory=list)  # (tool, start|end, t)
    side_effects: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0
    hang: bool = False
    fail_with: str | None = None
    big: bool = False

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


REC = Recorder()


async def _traced(name: str, delay: float) -> None:
    REC.log.append((name, "start", time.monotonic()))
    if REC.hang:
        await asyncio.sleep(3600)
    await asyncio.sleep(delay)
    REC.log.append((name, "end", time.monotonic()))


async def slow_read(ctx: ToolContext, key: str) -> dict[str, Any]:
    await _traced(f"slow_read:{key}", 0.15)
    return {"key": key, "value": f"value of {key}"}


async def write_note(ctx: ToolContext, text: str) -> dict[str, Any]:
    await _traced(f"write_note:{text}", 0.02)
    REC.side_effects.append({"text": text, "key": ctx.idempotency_key})
    return {"note_id": f"note-{len(REC.side_effects)}", "text": text}


async def flaky(ctx: ToolContext, n: int = 0) -> dict[str, Any]:
    REC.log.append(("flaky", "start", time.monotonic()))
    if REC.hang:
        await asyncio.sleep(3600)
    if REC.fail_with:
        raise ToolHandlerError(REC.fail_with, "the backend is down", retryable=True)
    return {"ok": True, "n": n}


async def customer_record(ctx: ToolContext, customer_id: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "customer_id": customer_id,
        "phone": "13800138000",
        "email": "li.lei@example.com",
        "id_card": "110101199003074512",
        "note": "bank card 6222021234567890123, api key sk-abcdefghijklmnopqrstuvwx",
    }
    if REC.big:
        record["history"] = [
            {"n": i, "text": f"call {i}: customer asked about order 2024052012{i:02d}"}
            for i in range(600)
        ]
    return record


async def notify_partner(ctx: ToolContext, to: str, message: str) -> dict[str, Any]:
    REC.side_effects.append({"to": to, "message": message, "key": ctx.idempotency_key})
    return {"delivered": True, "to": to}


async def bad_output(ctx: ToolContext) -> dict[str, Any]:
    return {"unexpected": "shape"}


async def hang_write(ctx: ToolContext, text: str) -> dict[str, Any]:
    """A write that hangs while REC.hang is set (a stuck downstream system)."""
    REC.log.append(("hang_write", "start", time.monotonic()))
    if REC.hang:
        await asyncio.sleep(3600)
    REC.side_effects.append({"text": text, "key": ctx.idempotency_key})
    return {"saved": text}


async def read_file(ctx: ToolContext, path: str) -> dict[str, Any]:
    # Deliberately naive: OSErrors from the path the model gave are the caller's problem.
    with open(path, encoding="utf-8") as handle:  # noqa: ASYNC230
        return {"text": handle.read(200)}
