"""Each recent session's history kept in memory between its turns, so a turn reads only what
is new and per-turn cost does not grow with the session.

A turn needs the session's snapshot and its messages after the summary watermark (the last
`max_messages` of them), grouped by turn with token estimates. Reading, parsing and grouping
all of them every turn cost time in proportion to the session's length. A `SessionView` keeps
them: messages grouped by turn, each group's chat shape and token count built once. A turn
*opens* its session's view (taking it out of the cache while it runs), reads only the messages
the view lacks, and *keeps* it again once the turn has completed, extended with what the turn
wrote (known from the rows it inserted; never read back).

The database stays the source of truth and the snapshot its durable copy: a view is only
extended with committed rows, and whatever it cannot account for rebuilds it from the database
exactly as a cold start does: a session seen for the first time, an evicted entry, a turn that
failed or was cancelled (its view is simply not kept), a retried turn, a deleted, archived or
resumed session (`forget`). What another writer adds to an earlier turn (a follow-up after an
unanswered question) is found by primary key: `watermark` is a key below which every message of
the turns up to `through` is in the view, or outside its window for good. That rests on a
session's message keys being drawn in the order their transactions commit, which SQLite (one
writer at a time) gives by itself and PostgreSQL's sequences give only because every insert
of a message locks its session's row first (app/storage/messages.py).

Memory is bounded: at most `max_sessions` views (least recently used go first), each holding at
most `max_messages` messages, and all of them together at most `max_total_messages` (else
long sessions would fill `max_sessions` windows of `max_messages` each).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from app.conversation.context import history_messages
from app.conversation.window import ContextTurn
from app.storage.messages import MessageStore
from app.storage.records import Message, Snapshot, Turn
from app.storage.snapshots import SnapshotStore


@dataclass
class _Group:
    """The messages of one turn in conversation order, and its chat shape once built."""

    number: int
    messages: list[Message]
    built: ContextTurn | None = None

    def context_turn(self, leave_open: frozenset[str]) -> ContextTurn:
        if leave_open:  # a resumed turn leaves its own calls open: build afresh
            return ContextTurn(self.number, history_messages(self.messages, leave_open=leave_open))
        if self.built is None:
            self.built = ContextTurn(self.number, history_messages(self.messages))
        return self.built

    def add(self, message: Message) -> bool:
        """Insert in key order; False when the message is here already."""
        keys = [m.pk for m in self.messages]
        at = bisect.bisect_left(keys, message.pk)
        if at < len(keys) and keys[at] == message.pk:
            return False
        self.messages.insert(at, message)
        self.built = None
        return True


@dataclass
class SessionView:
    """One session's history as its running turn sees it: the snapshot, and the window of
    messages of turns (summarized_turns, through] grouped by turn."""

    session_id: str
    snapshot: Snapshot | None
    through: int = 0
    watermark: int = 0
    written: list[Message] = field(default_factory=list)  # by the running turn
    _groups: list[_Group] = field(default_factory=list)
    _count: int = 0

    # -- reading -----------------------------------------------------------------------------

    def messages_of(self, number: int) -> list[Message]:
        group = self._group(number)
        return list(group.messages) if group else []

    def context_turns(
        self, leave_open: set[str] | frozenset[str] = frozenset()
    ) -> list[ContextTurn]:
        """The window as consistent chat messages grouped by turn."""
        frozen = frozenset(leave_open)
        return [g.context_turn(frozen) for g in self._groups]

    def previous_reply(self, number: int) -> str:
        """The last assistant text before turn `number`."""
        for group in reversed(self._groups):
            if group.number >= number:
                continue
            for message in reversed(group.messages):
                if message.role == "assistant" and message.content:
                    return message.content
        return ""

    def all_messages(self) -> list[Message]:
        return [m for g in self._groups for m in g.messages]

    @property
    def summarized_turns(self) -> int:
        return self.snapshot.summarized_turns if self.snapshot else 0

    # -- changing ----------------------------------------------------------------------------

    def merge(self, rows: list[Message]) -> None:
        for row in rows:
            group = self._group(row.turn_number)
            if group is None:
                group = _Group(row.turn_number, [])
                if not self._groups or self._groups[-1].number < row.turn_number:
                    self._groups.append(group)
                else:
                    numbers = [g.number for g in self._groups]
                    self._groups.insert(bisect.bisect_left(numbers, row.turn_number), group)
            if group.add(row):
                self._count += 1

    def trim(self, limit: int) -> None:
        """Keep the last `limit` messages: the oldest never come back into a window."""
        while self._count > limit and self._groups:
            first, excess = self._groups[0], self._count - limit
            if len(first.messages) <= excess:
                self._groups.pop(0)
                self._count -= len(first.messages)
            else:
                first.messages = first.messages[excess:]
                first.built = None
                self._count -= excess

    def fold(self, snapshot: Snapshot | None) -> None:
        """Turns up to the snapshot's watermark now live in its summary."""
        self.snapshot = snapshot
        cut = self.summarized_turns
        while self._groups and self._groups[0].number <= cut:
            self._count -= len(self._groups.pop(0).messages)

    def wrote(self, message: Message) -> None:
        self.written.append(message)
        self.merge([message])

    def _group(self, number: int) -> _Group | None:
        # The group asked for is nearly always among the last two.
        for group in reversed(self._groups):
            if group.number == number:
                return group
            if group.number < number:
                return None
        return None


@dataclass(frozen=True)
class Finished:
    """What the completing transaction found: the snapshot fields it wrote, when, and whether
    every message above the view's watermark was written by this turn (so the watermark may
    move past them instead of the next turn reading them back)."""

    snapshot_fields: dict[str, Any]
    at: float
    contiguous: bool


class SessionHistory:
    """The views of recent sessions, least recently used evicted first."""

    def __init__(
        self,
        messages: MessageStore,
        snapshots: SnapshotStore,
        *,
        max_messages: int,
        max_sessions: int,
        max_total_messages: int,
    ) -> None:
        self.messages = messages
        self.snapshots = snapshots
        self.max_messages = max_messages
        self.max_sessions = max_sessions
        # Never below one window: the view just kept must fit.
        self.max_total_messages = max(max_total_messages, max_messages)
        self._views: OrderedDict[str, SessionView] = OrderedDict()
        self._cached = 0  # messages in the kept views (not the open ones)
        self._open: dict[str, SessionView] = {}
        # For tests and benches: turns that read only what was new, turns that rebuilt from
        # the database, and how many messages they read in all.
        self.hits = 0
        self.rebuilds = 0
        self.messages_read = 0

    def __len__(self) -> int:
        return len(self._views)

    @property
    def cached_messages(self) -> int:
        """Messages held by the kept views (those of running turns not counted)."""
        return self._cached

    def _take(self, session_id: str) -> SessionView | None:
        view = self._views.pop(session_id, None)
        if view is not None:
            self._cached -= view._count
        return view

    async def open(self, turn: Turn) -> SessionView:
        """The session's view for `turn`, brought up to date; the turn owns it until `keep`."""
        view = self._take(turn.session_id)
        if view is None or turn.resume_from_step or turn.number <= view.through:
            view = await self._rebuild(turn)
            self.rebuilds += 1
        else:
            rows = await self.messages.added(
                turn.session_id,
                after_turn=view.summarized_turns,
                known_through=view.through,
                after_pk=view.watermark,
                through_turn=turn.number,
            )
            self.messages_read += len(rows)
            view.merge(rows)
            view.trim(self.max_messages)
            view.through = turn.number
            view.watermark = max([view.watermark, *(r.pk for r in rows)])
            self.hits += 1
        view.written = []
        self._open[turn.session_id] = view
        return view

    async def _rebuild(self, turn: Turn) -> SessionView:
        snapshot = await self.snapshots.get(turn.session_id)
        rows = await self.messages.for_context(
            turn.session_id,
            through_turn=turn.number,
            after_turn=snapshot.summarized_turns if snapshot else 0,
            limit=self.max_messages,
        )
        self.messages_read += len(rows)
        view = SessionView(turn.session_id, snapshot, through=turn.number)
        view.merge(rows)
        # Every message of the session committed before this read has a smaller key than any
        # committed after (keys are drawn in commit order: the module docstring).
        view.watermark = max((r.pk for r in rows), default=0)
        return view

    def keep(self, view: SessionView, finished: Finished) -> None:
        """The turn completed: keep its view for the session's next turn."""
        if self._open.get(view.session_id) is not view:
            return  # forgotten while the turn ran
        del self._open[view.session_id]
        if view.snapshot is not None:
            view.snapshot = replace(
                view.snapshot, **finished.snapshot_fields, updated_at=finished.at
            )
        if finished.contiguous and view.written:
            view.watermark = max(view.watermark, *(m.pk for m in view.written))
        view.written = []
        view.trim(self.max_messages)
        self._take(view.session_id)  # (none: the view was taken when the turn opened it)
        self._views[view.session_id] = view
        self._cached += view._count
        while len(self._views) > self.max_sessions or self._cached > self.max_total_messages:
            _, evicted = self._views.popitem(last=False)
            self._cached -= evicted._count

    def release(self, view: SessionView) -> None:
        """The turn did not complete: drop its view; the next turn rebuilds from the database."""
        if self._open.get(view.session_id) is view:
            del self._open[view.session_id]

    def forget(self, session_id: str) -> None:
        self._take(session_id)
        self._open.pop(session_id, None)
