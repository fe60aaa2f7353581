"""Questions about a rule (`policy_question`): answered, never acted on.

`knowledge_answer` is the one place the offline model answers such a question, from what its
`search_knowledge` call found: the relevant sentences of the best passage, word for word, with
the source (the turn cites it: app/conversation/turn/ground.py), in the customer's language; a
source in the other language is named as such. Nothing above the threshold: it says the answer
is not to hand and offers a colleague, in the customer's language: no guess, no write. A short
follow-up ("and for damaged items?", "那质量问题呢") asks the same question for another case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from app.knowledge import extractive
from app.knowledge.analysis import text_units
from app.knowledge.passages import SEARCH_TOOL, source_name
from app.knowledge.scoring import question_terms
from app.llm.local import templates as t
from app.llm.local.conversation import Exchange, UserTurn
from app.llm.local.templates import Lang

_FOLLOW_UP_MAX = 40
_FOLLOW_UP = re.compile(
    r"^(?:and\b|what about\b|how about\b|what if\b|also\b|same for\b|"
    r"那(?:么|如果)?|还有|如果是|要是|假如|换成)",
    re.I,
)

# A message put as a question: a question mark at its end, or a Chinese question particle.
_ASKS = re.compile(r"(?:[?？]|[吗嘛][\s。.!！~]*)$")

# A plain yes ("好的", "yes please", "可以，转吧"), and no more.
_YES = re.compile(
    r"^(?:好的?|好啊|是的?|对的?|确认|确定|可以|行|嗯+|要|需要|麻烦(?:你|您)?了?|转吧|yes|yeah|yep|"
    r"sure|ok(?:ay)?|confirm(?:ed)?|correct|please(?: do)?|go ahead)"
    r"(?:[\s,，.。!！~]*(?:please|thanks|thank you|谢谢|转吧|吧))*[\s,，.。!！~]*$",
    re.I,
)


def knowledge_answer(
    question: str, lang: Lang, found: dict[str, Any] | None, focus: str | None = None
) -> str:
    """The reply to a question about a rule, from what `search_knowledge` found: the relevant
    sentences of the best passage, word for word (so the grounding guard finds every figure in
    it), with its source, in the customer's language; a source in the other language is named
    as such. Nothing found (or no search possible): not to hand, and the offer of a colleague.
    For a follow-up, `focus` is its own words: the search asked the whole question, and the
    passage chosen is the one that best covers the new case ("and for damaged items?" after
    "if I change my mind, who pays for return shipping?")."""
    passages = (found or {}).get("passages") or []
    if not passages:
        return t.POLICY_UNKNOWN[lang]
    best = passages[0] if focus is None else _on(focus, passages)
    written_in = str(best.get("language") or lang)
    words = extractive.answer(
        question, str(best.get("text", "")), written_in, section=str(best.get("section", ""))
    )
    if not words:
        return t.POLICY_UNKNOWN[lang]
    source = source_name(str(best.get("title", "")), str(best.get("section", "")))
    key = "same" if written_in == lang else "other"
    return t.POLICY_ANSWER[key][lang].format(words=words, source=source)


def asks(text: str) -> bool:
    """Whether a message is put as a question ("…at the weekend?", "周末有人接电话吗")."""
    return _ASKS.search(text) is not None


def _on(focus: str, passages: list[dict[str, Any]]) -> dict[str, Any]:
    """The passage that covers most of `focus`'s terms (glossary forms count), the search's
    order deciding between equals."""
    terms = question_terms(focus)
    if not terms:
        return passages[0]

    def covered(passage: dict[str, Any]) -> int:
        said = " ".join(str(passage.get(k, "")) for k in ("title", "section", "text"))
        units = frozenset(text_units(said))
        return sum(term.matches(units) for term in terms)

    return max(passages, key=covered)  # max keeps the first of equals: the search's order


def last_topic(earlier: Sequence[Exchange]) -> str | None:
    """The title of the document the last earlier search found best; None when it found
    nothing (an older search's document is not what the customer follows up on)."""
    if not earlier or earlier[-1].outcome is None:
        return None
    data = earlier[-1].outcome.data
    passages = data.get("passages") if isinstance(data, dict) else None
    if not passages:
        return None
    return str(passages[0].get("title") or "") or None


def searched(exchanges: Sequence[Exchange]) -> dict[str, Any] | None:
    """What this turn's `search_knowledge` call answered (its data), or None before it ran.
    A failed search counts as found nothing: never a guess."""
    for exchange in reversed(exchanges):
        if exchange.name != SEARCH_TOOL or exchange.outcome is None:
            continue
        data = exchange.outcome.data
        return data if exchange.outcome.status == "success" and isinstance(data, dict) else {}
    return None


def follows_up(text: str) -> bool:
    """A short message that asks the last question again for another case ("and for damaged
    items?", "what about Macau?", "那质量问题呢", "如果是定制商品呢")."""
    stripped = text.strip()
    return len(stripped) <= _FOLLOW_UP_MAX and _FOLLOW_UP.match(stripped) is not None


def policy_query(turns: Sequence[UserTurn], continued: bool, topic: str | None = None) -> str:
    """What to search for: the last message; for a follow-up, the document the last answer
    came from (`topic`, its title) and the follow-up's own words, so the passage on the new
    case of the same rule comes first ("退货运费由谁承担" + "那破损的呢？"); without a topic, the
    question it follows and the follow-up."""
    if not continued:
        return turns[-1].text
    if topic:
        return f"{topic} {turns[-1].text}"
    asked: list[str] = []
    for turn in reversed(turns):
        asked.insert(0, turn.text)
        if not follows_up(turn.text):
            break
    return " ".join(asked)


def accepts_offer(turn: UserTurn) -> bool:
    """Whether `turn` says yes to the colleague `knowledge_answer` offered: a handoff, which
    the NLU channel reports as `human_handoff` so the handoff desk hears of it."""
    offered = turn.after.strip() in {text.strip() for text in t.POLICY_UNKNOWN.values()}
    return offered and says_yes(turn.text)


def says_yes(text: str) -> bool:
    return _YES.match(text.strip()) is not None
