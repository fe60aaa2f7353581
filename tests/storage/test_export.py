"""Export before purge, on both engines: what `rows_due` reads out is exactly what the purge
then deletes, table by table, each row once; one tenant's export holds only its rows. And
`hermes export` writes it as JSON lines from the configured database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from app.settings import PROJECT_ROOT
from app.storage.export import rows_due
from app.storage.purge import Purger
from app.storage.sqlite import SqliteDatabase
from tests.storage.test_purge import NOW, POLICY, archive, desk_sign_in, finished_session


async def test_the_export_is_what_the_purge_then_deletes(open_db: Any) -> None:
    db = await open_db()
    for tenant, days in (("acme", 40), ("acme", 200), ("zeta", 45), ("zeta", 3)):
        await archive(db, await finished_session(db, tenant), days_ago=days)
        await desk_sign_in(db, tenant, ends_in_s=-days)  # ended
    await desk_sign_in(db, "zeta", ends_in_s=60)  # still signed in
    policy = POLICY

    rows = [(table, row) async for table, row in rows_due(db, policy, NOW)]
    exported = Counter(table for table, _ in rows)
    report = await Purger(db, policy).purge(now=NOW)

    assert exported == Counter(report.by_table())
    assert exported["events"] > 0 and exported["sessions"] == 1
    assert exported["desk_sessions"] == 4
    events = [(r["session_id"], r["seq"]) for t, r in rows if t == "events"]
    assert len(events) == len(set(events))  # each row once
    zeta = [row async for _, row in rows_due(db, policy, NOW + 60 * 86400, "zeta")]
    assert zeta and {r["tenant_id"] for r in zeta} == {"zeta"}


def test_hermes_export_writes_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "h.db"

    async def seed() -> None:
        async with SqliteDatabase(path, migrations_dir=PROJECT_ROOT / "migrations") as db:
            await archive(db, await finished_session(db, "acme"), days_ago=40)

    asyncio.run(seed())
    out = tmp_path / "due.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "export", "--out", str(out)],
        env={**env, "HERMES_DB_PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    tables = Counter(line["table"] for line in lines)
    assert tables["events"] > 0 and tables["steps"] == 2 and tables["tool_calls"] == 2
    assert "sessions" not in tables  # archived 40 days ago: kept for 180
    assert f"exported {len(lines)} rows" in result.stderr
