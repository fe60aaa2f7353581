"""The cheap, deterministic channel beside the model: what the NLU made of the user's message.

It narrows the tools offered to the model to those serving the recognised intent (plus the
always-on ones; tools that declare no intents count as serving `out_of_scope`), and hands the
model the slots already
extracted, this turn's and the session's earlier ones. A low-confidence parse narrows nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from app.llm.local.policy import DialoguePolicy
from app.llm.messages import ChatMessage, SystemMessage
from app.nlu.types import Parser, ParseResult
from app.text.script import has_cjk
from app.tools.spec import ToolSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Understanding:
    result: ParseResult
    confident: bool

    def event(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "confident": self.confident}


class Understander:
    def __init__(self, parser: Parser | None, min_confidence: float) -> None:
        self.parser = parser
        self.min_confidence = min_confidence
        self._policy = None if parser is None else DialoguePolicy(parser, min_confidence)

    def understand(
        self, text: str, conversation: list[ChatMessage] | None = None
    ) -> Understanding | None:
        """The parse of `text`; with the conversation, a bare answer to a question keeps the
        intent that asked it (a lone "202405201235" after "which order should be refunded?"
        is a refund, though on its own it reads as an order-status question)."""
        if self.parser is None or not text:
            return None
        try:
            result = self.parser.parse(text)
            if conversation and self._policy is not None:
                folded = self._policy.understand_messages(conversation)
                if not _shows_script(result):  # "202405201234" is in the conversation's language
                    result = dataclasses.replace(result, language=folded.language)
                if folded.continued and folded.intent != result.intent:
                    return Understanding(dataclasses.replace(result, intent=folded.intent), True)
        except Exception:  # the model channel still works without it
            log.exception("NLU parse failed")
            return None
        return Understanding(result, result.confidence >= self.min_confidence)

    @staticmethod
    def tools_for(tools: list[ToolSpec], understanding: Understanding | None) -> list[ToolSpec]:
        if understanding is None or not understanding.confident:
            return tools
        intent = understanding.result.intent

        def serves(t: ToolSpec) -> bool:
            if t.always_on or intent in t.intents:
                return True
            # Tools that declare no intents (e.g. from MCP servers) are general-purpose: they
            # serve what the call-centre intents do not cover. A question about a rule may read
            # from them, never act through them (issue 27: a question never writes).
            general = intent == "out_of_scope" or (intent == "policy_question" and not t.acts)
            return general and not t.intents

        return [t for t in tools if serves(t)]

    @staticmethod
    def context_note(
        understanding: Understanding | None, earlier_slots: dict[str, str]
    ) -> SystemMessage | None:
        if understanding is None:
            return None
        result = understanding.result
        now = {s.name: s.value for s in result.slots}
        lines = [
            "Automatic reading of the user's last message (may be wrong; the message wins):",
            f"- intent: {result.intent} (confidence {result.confidence:.2f})",
        ]
        if now:
            lines.append("- details in this message: " + _pairs(now))
        before = {k: v for k, v in earlier_slots.items() if k not in now}
        if before:
            lines.append("- details given earlier in this conversation: " + _pairs(before))
        return {"role": "system", "content": "\n".join(lines)}


def _shows_script(result: ParseResult) -> bool:
    """Whether the message, its slot values cut out, has a word of some script: an order or
    tracking number alone says nothing about the language."""
    text = result.text
    for slot in sorted(result.slots, key=lambda s: s.start, reverse=True):
        if 0 <= slot.start < slot.end <= len(text):
            text = text[: slot.start] + " " + text[slot.end :]
    return has_cjk(text) or any(c.isascii() and c.isalpha() for c in text)


def _pairs(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
