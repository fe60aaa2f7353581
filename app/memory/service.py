"""The memory service: what the turn loop, the REST API and the sweeper call.

Every method takes a `Scope` (tenant + user) and never sees another user's rows. Writes are
transactions on the database's writer; recall reads through the read connections and notes what
it used with a write it does not wait for (see `drain`). A turn's memory writes (`before_turn`,
`after_turn`) go with the turn's `SessionWriter` (its session's lane, its worker's lease); an
operator's writes through the API belong to no one session (`NO_SESSION`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from app.errors import MemoryNotFound
from app.memory import erase, store
from app.memory.cues import is_denial, is_forget_command
from app.memory.decay import DecayPolicy, current_confidence
from app.memory.embeddings import Embedder, embed_one
from app.memory.extract import Proposal, ToolEvidence, TurnFacts, extract, proposals_to_drafts
from app.memory.lexicon import describe, find_entities, normalize
from app.memory.port import AfterTurn, BeforeTurn, Recall
from app.memory.queries import ListFilter, MemoryQueries
from app.memory.recall import Recaller
from app.memory.records import (
    Draft,
    HistoryEntry,
    MemoryItem,
    Scope,
    SweepReport,
    Tier,
    Written,
)
from app.memory.scoring import ScoringConfig
from app.memory.sweep import Retention, compact_index, sweep
from app.settings import MemorySettings
from app.storage import audit
from app.storage.port import Database
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.tx import Refused, Store, Tx

log = logging.getLogger(__name__)

Clock = Callable[[], float]
VERIFIED_CONFIDENCE = 0.95


class MemoryService(Store):
    def __init__(
        self,
        db: Database,
        *,
        policy: DecayPolicy | None = None,
        scoring: ScoringConfig | None = None,
        retention: Retention | None = None,
        embedder: Embedder | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(db)
        self.policy = policy or DecayPolicy.from_settings(MemorySettings())
        self.scoring = scoring or ScoringConfig.from_settings(MemorySettings())
        self.retention = retention or Retention()
        self.embedder = embedder
        self.clock = clock
        self.queries = MemoryQueries(db)
        self.recaller = Recaller(
            self.queries, policy=self.policy, scoring=self.scoring, embedder=embedder
        )
        self._touches: set[asyncio.Future[Any]] = set()

    # -- reading ----------------------------------------------------------------------------

    async def list_memories(
        self, scope: Scope, filters: ListFilter | None = None
    ) -> list[MemoryItem]:
        return await self.queries.list_items(scope, filters or ListFilter())

    async def get(self, scope: Scope, memory_id: str) -> MemoryItem:
        item = await self.queries.get(scope, memory_id)
        if item is None:
            raise MemoryNotFound("no such memory", memory_id=memory_id)
        return item

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        entries = await self.queries.history(scope, memory_id)
        if entries is None:
            raise MemoryNotFound("no such memory", memory_id=memory_id)
        return entries

    def effective_confidence(self, item: MemoryItem, now: float | None = None) -> float:
        at = self.clock() if now is None else now
        return current_confidence(item.confidence, item.last_confirmed_at, at, self.policy)

    # -- writing ----------------------------------------------------------------------------

    async def upsert(
        self,
        scope: Scope,
        key: str,
        value: str,
        *,
        tier: Tier = "fact",
        confidence: float = 1.0,
        valid_until: float | None = None,
        actor: str = "operator",
        role: str | None = None,
        source: str = "operator",
        session_id: str | None = None,
    ) -> Written:
        """Operator-entered (or tool-confirmed) fact: newer wins over whatever the key held."""
        entities = find_entities(value)
        draft = Draft(
            key=key,
            value=value,
            tier=tier,
            entity=entities[0].value if entities else None,
            confidence=confidence,
            source=source,  # type: ignore[arg-type]
            valid_until=valid_until,
        )
        written = await self.write(scope, [draft], actor=actor, role=role, session_id=session_id)
        return written[0]

    async def propose(
        self, scope: Scope, key: str, value: str, *, session_id: str | None = None
    ) -> Written:
        """A model-proposed fact without evidence: stored as pending, never recalled."""
        draft = Draft(key=key, value=value, confidence=0.6, status="pending", source="model")
        return (await self.write(scope, [draft], actor="model", session_id=session_id))[0]

    async def write(
        self,
        scope: Scope,
        drafts: Sequence[Draft],
        *,
        actor: str,
        role: str | None = None,
        session_id: str | None = None,
        now: float | None = None,
    ) -> list[Written]:
        """Write drafts in one transaction (the bulk path too: one job, one commit)."""
        drafts = await self._embedded(drafts)
        at = self.clock() if now is None else now

        def job(tx: Tx) -> list[Written]:
            written = [
                store.write_draft(
                    tx, scope, d, now=at, session_id=session_id, actor=actor, policy=self.policy
                )
                for d in drafts
            ]
            for w in written:
                _audit_written(tx, scope, w, actor, role, session_id)
            return written

        return await self.transact(NO_SESSION, job)  # an operator's (or the bulk path's)

    async def verify(
        self, scope: Scope, memory_id: str, *, actor: str, reason: str, role: str | None = None
    ) -> Written:
        def job(tx: Tx) -> Written | Refused:
            item = store.by_id(tx, scope, memory_id)
            if item is None or item.status != "pending":
                return Refused(MemoryNotFound("no such pending memory", memory_id=memory_id))
            written = store.verify(
                tx, scope, item, now=self.clock(), actor=actor, reason=reason,
                confidence=VERIFIED_CONFIDENCE, policy=self.policy,
            )  # fmt: skip
            _audit_written(tx, scope, written, actor, role, None)
            return written

        return await self.transact(NO_SESSION, job)

    async def reject(
        self, scope: Scope, memory_id: str, *, actor: str, reason: str, role: str | None = None
    ) -> None:
        def job(tx: Tx) -> Refused | None:
            item = store.by_id(tx, scope, memory_id)
            if item is None or item.status in ("rejected",):
                return Refused(MemoryNotFound("no such memory", memory_id=memory_id))
            store.set_status(tx, item, "rejected", now=self.clock(), actor=actor, reason=reason)
            _audit(tx, scope, "rejected", item.id, actor, role, key=item.key, reason=reason)
            return None

        await self.transact(NO_SESSION, job)

    # -- forgetting -------------------------------------------------------------------------

    async def delete(
        self, scope: Scope, memory_id: str, *, actor: str, reason: str, role: str | None = None
    ) -> None:
        def job(tx: Tx) -> list[erase.Erased] | Refused:
            item = store.by_id(tx, scope, memory_id)
            if item is None:
                return Refused(MemoryNotFound("no such memory", memory_id=memory_id))
            return self._erase(tx, [item], "deleted", actor, reason, role)

        await self._erased(await self.transact(NO_SESSION, job))

    async def forget(
        self,
        scope: Scope,
        *,
        key: str | None = None,
        query: str | None = None,
        actor: str,
        reason: str,
        role: str | None = None,
    ) -> list[str]:
        """Delete for good every memory with `key`, or whose text contains `query`."""
        if (key is None) == (query is None) or (query is not None and not query.strip()):
            raise ValueError("forget needs exactly one of key or query")

        def job(tx: Tx) -> list[erase.Erased]:
            items = erase.matching(tx, scope, key=key, query=query)
            return self._erase(tx, items, "forgotten", actor, reason, role)

        return [e.id for e in await self._erased(await self.transact(NO_SESSION, job))]

    async def forget_in_conversation(
        self, scope: Scope, writer: SessionWriter, text: str
    ) -> list[str] | None:
        """ "forget that" / "忘掉这个": delete what `writer`'s session stored or recalled last,
        written with it. None when `text` is not such a command."""
        if not is_forget_command(text):
            return None
        await self.drain()  # the last recall's note of what it used must be in
        session_id = writer.session_id

        def job(tx: Tx) -> list[erase.Erased]:
            items = erase.last_referenced(tx, scope, session_id)
            actor = f"session:{session_id}"
            return self._erase(tx, items, "forgotten", actor, "user_request", None, session_id)

        return [e.id for e in await self._erased(await self.transact(writer, job))]

    def _erase(
        self,
        tx: Tx,
        items: list[MemoryItem],
        action: str,
        actor: str,
        reason: str,
        role: str | None,
        session_id: str | None = None,
    ) -> list[erase.Erased]:
        for item in items:
            scope = Scope(item.tenant_id, item.user_id)
            _audit(tx, scope, action, item.id, actor, role, session_id, key=item.key, reason=reason)
        return erase.delete_items(
            tx, items, action=action, actor=actor, reason=reason, now=self.clock()
        )

    async def _erased(self, erased: list[erase.Erased]) -> list[erase.Erased]:
        """Erasure is done only when no postings of the erased text are left in the index:
        merge it (in short steps that let other writes in), and nothing of it in the database
        files (`Database.scrub`), before reporting success."""
        if erased:
            await compact_index(self)
            await self.db.scrub(("memory_history",))  # and out of the WAL (SQLite)
        return erased

    # -- the turn loop ----------------------------------------------------------------------

    async def recall(
        self,
        scope: Scope,
        text: str,
        *,
        writer: SessionWriter | None,
        intent: str | None = None,
        entities: Iterable[str] = (),
        force: bool = False,
    ) -> Recall:
        """What `scope`'s memory offers for `text`; what was used is noted with a write of
        `writer` (the recalling turn's; `NO_SESSION` outside a session)."""
        now = self.clock()
        result = await self.recaller.recall(
            scope, text, now=now, intent=intent, entities=entities, force=force
        )
        if result.items:
            pks = [s.item.pk for s in result.items]
            session_id = None if writer is None else writer.session_id
            future = self.db.submit(
                writer, lambda conn: store.touch(Tx(conn), scope, pks, session_id, now)
            )
            self._touches.add(future)
            future.add_done_callback(self._touched)
        return result

    def _touched(self, future: asyncio.Future[Any]) -> None:
        self._touches.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.warning("noting recalled memories failed", exc_info=future.exception())

    async def drain(self) -> None:
        """Wait until every recall's last-accessed note is committed."""
        if self._touches:
            await asyncio.gather(*list(self._touches), return_exceptions=True)

    async def before_turn(
        self, scope: Scope, writer: SessionWriter, text: str, intent: str | None = None
    ) -> BeforeTurn:
        forgotten = await self.forget_in_conversation(scope, writer, text)
        if forgotten is not None:
            return BeforeTurn(forgotten=forgotten, forget_command=True)
        return BeforeTurn(await self.recall(scope, text, intent=intent, writer=writer))

    async def after_turn(
        self,
        scope: Scope,
        writer: SessionWriter,
        user_text: str,
        final_text: str = "",
        tool_results: Sequence[ToolEvidence] = (),
        previous_assistant: str = "",
        proposals: Sequence[Proposal] = (),
    ) -> AfterTurn:
        facts = TurnFacts(user_text, final_text, previous_assistant, tuple(tool_results))
        found = extract(facts)
        drafts = await self._embedded(
            found.drafts + proposals_to_drafts(proposals, user_text, found.evidence)
        )
        if not drafts and not found.refuted and not await self._has_pending(scope):
            return AfterTurn()  # most turns: nothing to write, so no write transaction
        said, denied = normalize(user_text), is_denial(user_text)
        mentioned = normalize(previous_assistant)
        now = self.clock()
        session_id = writer.session_id
        actor = f"session:{session_id}"

        def job(tx: Tx) -> AfterTurn:
            out = AfterTurn()
            # Earlier proposals first: this turn's words or tool results may prove them.
            for pending in store.proposals(tx, scope):
                value = normalize(pending.value).strip()
                if value and (value in found.evidence or value in said):
                    verified = store.verify(
                        tx, scope, pending, now=now, actor=actor, reason="evidence",
                        confidence=VERIFIED_CONFIDENCE, policy=self.policy,
                    )  # fmt: skip
                    _audit_written(tx, scope, verified, actor, None, session_id)
                    out.verified.append(pending.id)
                elif denied and value and value in mentioned:
                    store.set_status(
                        tx, pending, "rejected", now=now, actor=actor, reason="user_denied"
                    )
                    _audit(tx, scope, "rejected", pending.id, actor, None, session_id)
                    out.rejected.append(pending.id)
            # A contact value a tool refused this turn ("that number doesn't match the
            # account") is not the customer's, whatever an earlier turn heard them say.
            for key in ("contact.phone", "contact.email") if found.refuted else ():
                held = store.current(tx, scope, key)
                if (
                    held is not None
                    and held.source != "tool"
                    and normalize(held.value) in found.refuted
                ):
                    store.set_status(
                        tx, held, "rejected", now=now, actor=actor, reason="tool_refuted"
                    )
                    _audit(tx, scope, "rejected", held.id, actor, None, session_id)
                    out.rejected.append(held.id)
            for draft in drafts:
                written = store.write_draft(
                    tx, scope, draft, now=now, session_id=session_id, actor=actor,
                    policy=self.policy,
                )  # fmt: skip
                _audit_written(tx, scope, written, actor, None, session_id)
                out.written.append(written)
            return out

        return await self.transact(writer, job)

    async def _has_pending(self, scope: Scope) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM memories WHERE tenant_id = ? AND user_id = ? AND status = 'pending'"
            " LIMIT 1",
            (scope.tenant_id, scope.user_id),
        )
        return row is not None

    async def _embedded(self, drafts: Sequence[Draft]) -> list[Draft]:
        if self.embedder is None:
            return list(drafts)
        out = []
        for d in drafts:
            blob = await embed_one(self.embedder, describe(d.key, d.value, d.entity))
            out.append(replace(d, embedding=blob, embedding_model=self.embedder.model))
        return out

    # -- housekeeping -----------------------------------------------------------------------

    async def sweep(self, now: float | None = None) -> SweepReport:
        return await sweep(self, self.clock() if now is None else now, self.retention)


# -- the audit trail ---------------------------------------------------------------------------


def _audit(
    tx: Tx,
    scope: Scope,
    action: str,
    memory_id: str,
    actor: str,
    role: str | None,
    session_id: str | None = None,
    **details: Any,
) -> None:
    """One audit row for a change to a memory: its id and key, never its value."""
    audit.record(
        tx,
        tenant_id=scope.tenant_id,
        actor=actor,
        role=role or audit.role_of(actor),
        action=f"memory.{action}",
        target_id=memory_id,
        session_id=session_id,
        details={"user_id": scope.user_id, **details},
    )


def _audit_written(
    tx: Tx, scope: Scope, written: Written, actor: str, role: str | None, session_id: str | None
) -> None:
    if written.action == "unchanged":
        return
    item = written.item
    action = "written" if written.action in ("created", "updated", "confirmed") else written.action
    _audit(
        tx, scope, action, item.id, actor, role, session_id,
        key=item.key, change=written.action, status=item.status,
    )  # fmt: skip
