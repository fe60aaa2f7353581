"""A tool with a side effect another process can count: each call appends a line to the file
named by LEASE_TEST_SIDE_EFFECTS (the takeover test's servers run in processes of their own)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from app.tools.context import ToolContext


async def record_visit(ctx: ToolContext, note: str) -> dict[str, Any]:
    await asyncio.to_thread(_append, Path(os.environ["LEASE_TEST_SIDE_EFFECTS"]), note, ctx)
    return {"recorded": note}


def _append(path: Path, note: str, ctx: ToolContext) -> None:
    with path.open("a", encoding="utf-8") as sink:
        sink.write(f"{ctx.idempotency_key} {note}\n")
