"""What a turn leaves in the SQLite database: bytes per plain turn and per order-status turn, by
table and index, against the targets (issue 16: at most 3 KB for a one-call turn, 6 KB for a turn
with a tool call).

Runs the real service in this process (SQLite files, the demo data, the fake model server on a
socket) and takes turns over SSE one at a time. Sessions are created first and measured on
their own; then `--turns` turns of each kind, `--session-turns` to a session:

- plain: one model call that streams a short answer;
- order status: the model calls `query_order_status`, then answers.

Before and after each kind the WAL is checkpointed (TRUNCATE) and every table and index is
measured with SQLite's `dbstat`: `used` is the bytes its pages hold (page size less unused
space), `file` the growth of the database file itself (whole pages, after the checkpoint; the
WAL is then empty). `--dump` prints the rows one turn of each kind wrote, column by column.

    python bench/bytes_per_turn.py [--turns 200] [--session-turns 5] [--dump]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Run as a script, this folder comes first on sys.path and its `mcp.py` would hide the SDK.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent))  # after PYTHONPATH: another checkout's `app` may come first
# The same turns bench/turn_writes.py counts statements of.
from bench.turn_writes import CUSTOMER, ORDER, REPLY, bench_settings, wait_idle  # noqa: E402

TARGETS = {"plain": 3 * 1024, "order status": 6 * 1024}


@dataclass(frozen=True)
class Sizes:
    """Bytes in use per table or index (`objects`) and the database file's size."""

    objects: dict[str, int]
    file: int

    def minus(self, other: Sizes) -> Sizes:
        names = set(self.objects) | set(other.objects)
        grown = {n: self.objects.get(n, 0) - other.objects.get(n, 0) for n in names}
        return Sizes(grown, self.file - other.file)


def _label(conn: sqlite3.Connection) -> dict[str, str]:
    """dbstat's object names as 'table' or 'table: index' (autoindexes are the table's keys)."""
    rows = conn.execute("SELECT type, name, tbl_name FROM sqlite_schema").fetchall()
    return {name: name if kind == "table" else f"{table}: {name}" for kind, name, table in rows}


def measure(path: Path) -> Sizes:
    """Checkpoint the WAL away, then the bytes every table and index holds."""
    with sqlite3.connect(path, timeout=30) as conn:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            raise RuntimeError("the WAL checkpoint was blocked by a reader")
        labels = _label(conn)
        rows = conn.execute(
            "SELECT name, SUM(pgsize - unused) FROM dbstat GROUP BY name"
        ).fetchall()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    return Sizes({labels.get(n, n): int(b) for n, b in rows}, int(pages) * int(page))


# Events carry the turn's number in its session, not its id (migration 0017).
_TURN_ROWS = {
    "events": "SELECT e.* FROM turns t JOIN sessions s ON s.id = t.session_id"
    " JOIN events e ON e.session_key = s.session_key AND e.turn_number = t.number"
    " WHERE t.id = ? ORDER BY e.seq",
}


def dump_turn(path: Path, turn_id: str) -> None:
    """Every row the turn wrote (by turn id), with each column's size, largest tables first."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT m.name FROM sqlite_schema m WHERE m.type = 'table'"
                " AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'turn_id')"
            )
        ]
        for table in [*tables, "events"]:
            rows = conn.execute(
                _TURN_ROWS.get(table, f"SELECT * FROM {table} WHERE turn_id = ?"), (turn_id,)
            ).fetchall()
            if not rows:
                continue
            total = sum(_row_bytes(r) for r in rows)
            print(f"  {table}: {len(rows)} rows, {total} bytes of values")
            for row in rows:
                cols = sorted(((k, _size(row[k])) for k in row.keys()), key=lambda kv: -kv[1])
                head = row["type"] if "type" in row.keys() else row.keys()[0]
                shown = ", ".join(f"{k}={n}" for k, n in cols[:6])
                print(f"    {head}: {_row_bytes(row)} ({shown})")


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes):
        return len(value)
    return 8


def _row_bytes(row: sqlite3.Row) -> int:
    return sum(_size(row[k]) for k in row.keys())


async def run(args: argparse.Namespace) -> dict[str, float]:
    from app.demo.generator import regenerate
    from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
    from app.testing import serve, stream_turn

    tmp = Path(tempfile.mkdtemp(prefix="hermes-bytes-"))
    regenerate(tmp / "demo.db")
    db_path = tmp / "hermes.db"
    kinds = ("plain", "order status")
    found: dict[str, Sizes] = {}
    with FakeLLMServer(default=Reply(REPLY)) as llm:
        async with serve(bench_settings(tmp, llm.url)) as svc:
            client, runtime = svc.client, svc.runtime

            async def turn(kind: str, session_id: str, i: int) -> str:
                if kind == "order status":
                    llm.enqueue(
                        ToolCalls(ToolCall("query_order_status", {"order_id": ORDER})),
                        Reply(REPLY),
                    )
                    content = f"where is my order {ORDER}?"
                else:
                    content = f"hello, a question about my account ({i})"
                got = await stream_turn(client, session_id, content)
                if got[-1].event != "turn.completed":
                    raise RuntimeError(f"a {kind} turn ended with {got[-1].event}: {got[-1].data}")
                await wait_idle(runtime)
                return str(got[-1].data["turn_id"])

            async def sessions(n: int) -> list[str]:
                made = []
                for _ in range(n):
                    r = await client.post("/v1/sessions", json={"user_id": CUSTOMER})
                    r.raise_for_status()
                    made.append(str(r.json()["id"]))
                return made

            for kind in kinds:  # warm-up: first calls import and connect
                warm = await turn(kind, (await sessions(1))[0], 0)
                if args.dump:
                    print(f"one {kind} turn wrote:")
                    dump_turn(db_path, warm)
            per = max(1, args.session_turns)
            count = -(-args.turns // per)
            for kind in kinds:
                before = measure(db_path)
                ids = await sessions(count)
                made = measure(db_path)
                found.setdefault("session", made.minus(before))
                left = args.turns
                for sid in ids:
                    for i in range(min(per, left)):
                        await turn(kind, sid, i)
                    left -= per
                found[kind] = measure(db_path).minus(made)
    shutil.rmtree(tmp, ignore_errors=True)
    report(found, args.turns, count)
    return {kind: found[kind].file / args.turns for kind in kinds}


def report(found: dict[str, Sizes], turns: int, sessions: int) -> None:
    kinds = ("plain", "order status")
    names = sorted(
        {n for s in found.values() for n, b in s.objects.items() if b},
        key=lambda n: -max(found[k].objects.get(n, 0) / turns for k in kinds),
    )
    print(f"bytes in use per turn ({turns} turns of each kind), per table and index:")
    print(f"  {'table: index':<44}{'session':>9}{'plain':>9}{'order status':>14}")
    totals: dict[str, float] = defaultdict(float)
    for name in names:
        row = [found["session"].objects.get(name, 0) / sessions]
        row += [found[k].objects.get(name, 0) / turns for k in kinds]
        for key, value in zip(("session", *kinds), row, strict=True):
            totals[key] += value
        print(f"  {name:<44}{row[0]:>9.0f}{row[1]:>9.0f}{row[2]:>14.0f}")
    print(
        f"  {'in use':<44}{totals['session']:>9.0f}{totals['plain']:>9.0f}"
        f"{totals['order status']:>14.0f}"
    )
    files = [found["session"].file / sessions] + [found[k].file / turns for k in kinds]
    print(
        f"  {'file growth (after a TRUNCATE checkpoint)':<44}"
        + "".join(f"{v:>{w}.0f}" for v, w in zip(files, (9, 9, 14), strict=True))
    )
    for kind in kinds:
        per_turn = found[kind].file / turns
        verdict = "PASS" if per_turn <= TARGETS[kind] else "FAIL"
        print(f"{verdict}  {kind}: {per_turn:.0f} bytes per turn (target <= {TARGETS[kind]})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of each kind")
    parser.add_argument("--session-turns", type=int, default=5, help="turns per session")
    parser.add_argument("--dump", action="store_true", help="print the rows of one turn per kind")
    args = parser.parse_args()
    per_turn = asyncio.run(run(args))
    return 0 if all(per_turn[k] <= TARGETS[k] for k in TARGETS) else 1


if __name__ == "__main__":
    sys.exit(main())
