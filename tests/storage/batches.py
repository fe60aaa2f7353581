"""Putting chosen write jobs in one batch of the real writer, for tests of what a batch does.

The writer gathers whatever is queued on a lane while its thread is busy. `one_batch` keeps the
thread of `writer`'s lane busy in a job of its own until the block ends: every job submitted to
that lane inside the block (with `writer`, or another handle of its lane) is then run in the
same batch, in submission order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from app.storage.port import Database
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx

_DEADLINE_S = 10.0


@contextlib.asynccontextmanager
async def one_batch(db: Database, writer: SessionWriter | None) -> AsyncIterator[None]:
    """Jobs submitted on `writer`'s lane inside the block share one batch (see the
    docstring)."""
    entered, go = threading.Event(), threading.Event()

    def gate(conn: Any) -> None:
        entered.set()
        go.wait(_DEADLINE_S)

    gated = db.submit(writer, gate)
    try:
        assert await asyncio.to_thread(entered.wait, _DEADLINE_S), "the writer never started"
        yield
    finally:
        go.set()
        await gated


async def submitted(*coroutines: Any) -> list[asyncio.Task[Any]]:
    """Start each coroutine as a task and let it run until it waits (a write it submitted)."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    await asyncio.sleep(0)  # one turn of the loop: each task runs up to its first wait
    return tasks


async def beside_a_batchmate(
    store: Store, writer: SessionWriter | None, *writes: Coroutine[Any, Any, Any]
) -> tuple[int, list[asyncio.Task[Any]]]:
    """Run `writes` (made with `writer`) in one batch behind a neighbouring job of `store`:
    how many times the neighbour ran (a batch run again runs every job of it again), and the
    writes, done."""
    runs: list[None] = []  # instrumentation: the one thing a job here changes outside

    def neighbour(tx: Tx) -> None:
        runs.append(None)

    async with one_batch(store.db, writer):
        done, *tasks = await submitted(store.transact(writer, neighbour), *writes)
    await done
    await asyncio.wait(tasks)
    return len(runs), tasks


def another_lane(db: Database, session_id: str) -> SessionWriter:
    """A handle whose writes go to another writer connection than `session_id`'s (as another
    process's would)."""
    key = next(k for k in map(str, range(100)) if db.lane_of(k) != db.lane_of(session_id))
    return SessionWriter(key)


async def done_or_waiting_for_a_lock(db: Database, task: asyncio.Future[Any]) -> None:
    """Until `task` is done or a connection to `db` (PostgreSQL) waits for a row lock."""
    deadline = time.monotonic() + _DEADLINE_S
    while not task.done() and not await db.fetchone(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'"
    ):
        assert time.monotonic() < deadline, "neither done nor waiting for a lock"
        await asyncio.sleep(0.01)
