"""Ground: a reply that answers from the call centre's documents says only what they say.

After the agent loop, when the turn searched the knowledge base (`search_knowledge`):
  - `knowledge.retrieved` lists what the searches found;
  - every figure of the reply (number, amount, duration, date, time, percentage, phone, URL,
    email) must appear in a passage, another tool result of the turn or the customer's own
    words (app/knowledge/grounding.py). If one does not, the customer has seen nothing yet (the
    loop holds a knowledge turn's text back): the model is asked once more with the finding;
    if its new reply is still unsupported, the customer gets the best passage's own words and
    the offer of a colleague. `hermes_grounding_blocked_total` counts both;
  - the reply carries `citations` for the passages it used (app/knowledge/passages.py), each
    with a `snippet` (the start of the passage's text) so a person reading the conversation
    sees what was cited.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app import events
from app.conversation.loop import AgentLoop, turn_language
from app.conversation.turn.state import TurnState
from app.knowledge import extractive
from app.knowledge.analysis import text_units
from app.knowledge.gaps import record_gap
from app.knowledge.grounding import Claim, claims, unsupported
from app.knowledge.passages import SEARCH_TOOL, Citation, source_name
from app.observability import metrics
from app.tools.shaping import Redactor

# A passage is cited when at least this share of the reply's words is in it (see `cited`).
CITED_SHARE = 0.5
CLOSE_SHARE = 0.15  # and within this of the best passage's share: not a neighbour of the source

FINDING = (
    f"Your reply states {{figures}}, which no passage from {SEARCH_TOOL}, no tool result and "
    "nothing the customer said contains. Answer again, only from the passages, in the "
    "customer's language; if they do not say it, say you do not know and offer a colleague."
)
FALLBACK = {
    "en": "Here is what our policy says ({source}): {words} If you need more than this, I can "
    "get a colleague to help you.",
    "zh": "根据《{source}》：{words} 如需进一步帮助，我可以为您转接人工客服。",
}


@dataclass(frozen=True)
class Retrieved:
    query: str
    passages: list[dict[str, Any]]  # as search_knowledge returned them, best first


def retrieved(results: Sequence[tuple[Any, Any]]) -> list[Retrieved]:
    """The turn's successful knowledge searches, in the order they ran."""
    found = []
    for call, result in results:
        if call.name != SEARCH_TOOL or result.status != "success":
            continue
        data = result.data if isinstance(result.data, dict) else {}
        found.append(Retrieved(_query(call.arguments), list(data.get("passages") or [])))
    return found


def _query(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return ""
    return str(parsed.get("query", "")) if isinstance(parsed, dict) else ""


def _text_of(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)


class Ground:
    def __init__(self, loop: AgentLoop, redactor: Redactor) -> None:
        self.loop = loop
        self.redactor = redactor

    async def run(self, state: TurnState) -> None:
        searches = retrieved(state.transcript.results)
        if not searches:
            return
        for search in searches:
            hits = [
                {k: p.get(k) for k in ("document_id", "chunk_id", "title", "section", "score")}
                for p in search.passages
            ]
            query = self.redactor.text(search.query)
            await state.reports.emit(events.knowledge_retrieved(state.turn.id, query, hits))
        passages = [p for s in searches for p in s.passages]
        if not passages:  # the documents had nothing: a gap the operator should see
            question, tenant_id = self.redactor.text(state.user_text), state.turn.tenant_id
            state.emitter.writes.defer(lambda tx: record_gap(tx, tenant_id, question, "no_answer"))
        outcome = state.outcome
        if outcome.stopped != "final" or not passages:
            return
        sources = [
            " ".join(str(p.get(k, "")) for k in ("title", "section", "text")) for p in passages
        ]
        sources += [
            _text_of(r.data)
            for c, r in state.transcript.results
            if c.name != SEARCH_TOOL and r.data is not None
        ]
        sources.append(state.user_text)
        bad = unsupported(outcome.text, sources)
        if bad:
            metrics.GROUNDING_BLOCKED.labels(outcome="retried").inc()
            finding = FINDING.format(figures=", ".join(f'"{c.raw}"' for c in bad))
            await self.loop.revise(state.run, outcome, finding)
            if unsupported(outcome.text, sources):
                metrics.GROUNDING_BLOCKED.labels(outcome="fallback").inc()
                outcome.text = self._fallback(state, passages[0])
                outcome.metadata["grounding"] = "fallback"
            else:
                outcome.metadata["grounding"] = "revised"
        used = cited(passages, outcome.text)
        if used:
            outcome.metadata["citations"] = used

    def _fallback(self, state: TurnState, passage: dict[str, Any]) -> str:
        language = turn_language(state.run)
        words = extractive.answer(
            state.user_text,
            str(passage.get("text", "")),
            str(passage.get("language", language)),
            section=str(passage.get("section", "")),
        )
        source = source_name(str(passage.get("title", "")), str(passage.get("section", "")))
        return FALLBACK[language].format(source=source, words=words)


def cited(passages: list[dict[str, Any]], reply: str) -> list[dict[str, str]]:
    """The citations of the passages `reply` used, each once, in the order they came: those
    sharing at least CITED_SHARE of the reply's words (an extractive answer shares all of
    them) and close to the best; failing any, those stating one of the reply's figures (a
    reply in the customer's language from a passage in the other)."""
    shares = [shared_share(reply, _cited_text(p)) for p in passages]
    best = max(shares, default=0.0)
    worded = [
        p
        for p, share in zip(passages, shares, strict=True)
        if share >= CITED_SHARE and share >= best - CLOSE_SHARE
    ]
    if not worded:
        figures = {c.value for c in claims(reply)}
        worded = [p for p in passages if figures & _values(claims(str(p.get("text", ""))))]
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for passage in worded:
        citation = Citation.of(passage)
        key = (citation.document_id, citation.chunk_id)
        if key not in seen:
            seen.add(key)
            out.append(citation.as_dict())
    return out


def _cited_text(passage: dict[str, Any]) -> str:
    """What a passage says, with the title and section a reply may name it by."""
    return " ".join(str(passage.get(k, "")) for k in ("title", "section", "text"))


def shared_share(reply: str, passage: str) -> float:
    """The share of the reply's words (Latin stems, Chinese character pairs) in the passage."""
    words = {u for u in text_units(reply) if len(u) > 1}
    if not words:
        return 0.0
    return len(words & set(text_units(passage))) / len(words)


def _values(found: list[Claim]) -> set[str]:
    return {c.value for c in found}
