"""Deferred writes: a turn's writes that nobody waits for, carried by its next transaction.

A turn writes often and waits for little: a step's start, a tool result's message, the NLU
record, the last text of a reply. Each of those is *deferred*: `defer(fn)` runs `fn` at the
start of the turn's next write, inside its transaction; `defer_after(fn)` at its end, where `fn`
sees what that write did (`tx.events`: e.g. the `tool.completed` whose result a step refers
to). The next write is `now(fn)` (awaited) or `send(fn)` (queued without waiting); `flush()`
sends what is deferred on its own, when the turn ends without another write to carry it.

Every write goes with the turn's `SessionWriter` (app/storage/session_writer.py), given when
the turn's writes are made: its session's lane, and its worker's lease fence while the worker
owns the session. The lane keeps submission order, so the turn's own events keep their order;
defer only what no other writer of the session could need to come after (the caller knows
which: e.g. a step's start, carried by the `tool.started` event right behind it). A deferred
write that fails fails the write carrying it. Nothing is published before it commits.

A deferred write is a job like any other (app/storage/writer.py): it returns what it produced
and changes nothing else. Whoever deferred it gets that result through its `then`, called on
the event loop once the carrying transaction has committed, never while the job runs: an
attempt of the batch that is rolled back and run again leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.errors import DatabaseClosed
from app.storage.session_writer import SessionWriter
from app.storage.tx import Store, Tx
from app.storage.writer import shielded

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Deferred:
    fn: Callable[[Tx], Any]
    then: Callable[[Any], None] | None


@dataclass(frozen=True)
class _Carried(Generic[T]):
    """What one run of a carrying transaction produced: its own write's result and, in order,
    those of the deferred writes it carried."""

    result: T
    deferred: list[Any]


class DeferredWrites:
    """One turn's writes, fewer and larger (see the module docstring)."""

    def __init__(self, store: Store, writer: SessionWriter) -> None:
        self._store = store
        self.writer = writer  # the turn's: its session's lane, its worker's lease
        self._before: list[_Deferred] = []
        self._after: list[_Deferred] = []

    def defer(self, fn: Callable[[Tx], T], then: Callable[[T], None] | None = None) -> None:
        """Run `fn` first in the turn's next write; `then(result)` once that commits."""
        self._before.append(_Deferred(fn, then))

    def defer_after(self, fn: Callable[[Tx], T], then: Callable[[T], None] | None = None) -> None:
        """Like `defer`, but run last in the next write, after what it does."""
        self._after.append(_Deferred(fn, then))

    def send(self, fn: Callable[[Tx], T]) -> asyncio.Future[T]:
        """The deferred writes and `fn` as one transaction, queued without waiting; the future
        is `fn`'s result once committed."""
        before, after = self._before, self._after
        self._before, self._after = [], []

        def carried(tx: Tx) -> _Carried[T]:
            first = [write.fn(tx) for write in before]
            result = fn(tx)
            return _Carried(result, first + [write.fn(tx) for write in after])

        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def committed(outcome: _Carried[T]) -> None:
            try:
                for write, result in zip([*before, *after], outcome.deferred, strict=True):
                    if write.then is not None:
                        write.then(result)
            finally:
                if not done.done():
                    done.set_result(outcome.result)

        written = self._store.transact_nowait(self.writer, carried, then=committed)
        written.add_done_callback(functools.partial(_failed, done))
        return done

    async def now(self, fn: Callable[[Tx], T]) -> T:
        """`send`, awaited. (Shielded: a cancelled turn must not make the write look failed; it
        still commits.)"""
        return await shielded(self.send(fn))

    def flush(self) -> None:
        """Send what is deferred on its own (the turn ends without another write to carry it)."""
        if not self._before and not self._after:
            return
        try:
            self.send(_nothing).add_done_callback(_log_failure)
        except DatabaseClosed:  # shutting down: nothing more can be stored
            log.warning("deferred writes of an ended turn were dropped: the database is closed")


def _nothing(tx: Tx) -> None:
    return None


def _failed(done: asyncio.Future[Any], written: asyncio.Future[Any]) -> None:
    """The carrying write failed (before or during its commit): so did `fn`'s."""
    if done.done():
        return
    if written.cancelled():
        done.cancel()
    elif (error := written.exception()) is not None:
        done.set_exception(error)


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("deferred writes of an ended turn failed", exc_info=future.exception())
