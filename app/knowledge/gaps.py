"""Knowledge gaps: the questions the documents did not answer, counted per tenant.

Two kinds (migrations/0021_knowledge_gaps.sql): a search of the turn found no passage above
the threshold (`no_answer`, recorded by the turn with its next write), and a question a human
agent answered after a handoff (`human`, recorded with the agent's reply). The same question
again, told apart by its normalised text, counts once more. The text is stored as the caller
masked it: an operator reads which topics are missing, not who asked.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from app.storage.tx import Store, Tx

Reason = Literal["no_answer", "human"]
MAX_QUESTION_CHARS = 500

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s?？!！。.,，~～]+$")


@dataclass(frozen=True)
class Gap:
    question: str
    reason: Reason
    count: int
    first_seen_at: float
    last_seen_at: float


def gap_key(question: str) -> str:
    """The same question, however it was spaced, cased or punctuated at its end."""
    normal = _TRAILING.sub("", _SPACE.sub(" ", question.strip().lower()))
    return hashlib.sha256(normal.encode()).hexdigest()[:32]


def record_gap(tx: Tx, tenant_id: str, question: str, reason: Reason) -> None:
    """Count `question` (already masked) as a gap of `tenant_id`, in the caller's transaction."""
    text = question.strip()[:MAX_QUESTION_CHARS]
    if not text:
        return
    tx.execute(
        "INSERT INTO knowledge_gaps (tenant_id, key, reason, question, count, first_seen_at,"
        " last_seen_at) VALUES (?, ?, ?, ?, 1, ?, ?)"
        " ON CONFLICT (tenant_id, key, reason) DO UPDATE SET count = knowledge_gaps.count + 1,"
        " last_seen_at = excluded.last_seen_at, question = excluded.question",
        (tenant_id, gap_key(text), reason, text, tx.now, tx.now),
    )


class KnowledgeGaps(Store):
    async def top(
        self, tenant_id: str, *, limit: int = 50, reason: Reason | None = None
    ) -> list[Gap]:
        """The tenant's gaps, the most asked first, then the most recent."""
        where, params = "tenant_id = ?", [tenant_id]
        if reason is not None:
            where += " AND reason = ?"
            params.append(reason)
        rows = await self.db.fetchall(
            "SELECT question, reason, count, first_seen_at, last_seen_at FROM knowledge_gaps"
            f" WHERE {where} ORDER BY count DESC, last_seen_at DESC LIMIT ?",
            (*params, limit),
        )
        return [
            Gap(r["question"], r["reason"], int(r["count"]), r["first_seen_at"], r["last_seen_at"])
            for r in rows
        ]
