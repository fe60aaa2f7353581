"""`hermes/local` as a `ChatModel`: the dialogue policy answering in-process, no LiteLLM.

Each call reads the conversation and the offered tools, lets the policy decide, and streams
the answer as a chat model would: text in pieces of about `chunk_chars` (cut after punctuation
or spaces), a tool call in the OpenAI shape, then the end with estimated token usage and the
model named `hermes/local`.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.llm.catalog import LOCAL_MODEL
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta
from app.llm.local.policy import AskForSlot, CallTool, Decision, DialoguePolicy, Handoff, Reply
from app.nlu.types import Parser
from app.settings import NluSettings
from app.text.tokens import estimate_message, estimate_tokens

log = logging.getLogger(__name__)

# Clause ends: text streams in pieces that end at punctuation or spaces where it can.
_PIECE = re.compile(r"[^，。！？；：、,.!?;:\s]*[，。！？；：、,.!?;:\s]*")


@dataclass(frozen=True)
class LocalModelConfig:
    min_confidence: float  # below it the offline model hands off
    chunk_chars: int = 12  # about this much text per streamed piece (not a setting)

    @classmethod
    def from_settings(cls, settings: NluSettings) -> LocalModelConfig:
        return cls(settings.min_confidence)


@dataclass(frozen=True)
class _Answer:
    decision: Decision
    text: str
    call: ToolCallDelta | None
    prompt_tokens: int
    completion_tokens: int


class LocalModel:
    def __init__(self, parser: Parser, config: LocalModelConfig | None = None) -> None:
        self.config = config or LocalModelConfig.from_settings(NluSettings())
        self.policy = DialoguePolicy(parser, self.config.min_confidence)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        answer = self._answer(request)
        for piece in split_text(answer.text, self.config.chunk_chars):
            yield TextDelta(piece)
        if answer.call is not None:
            yield answer.call
        yield StreamEnd(
            "tool_calls" if answer.call else "stop",
            LOCAL_MODEL,
            answer.prompt_tokens,
            answer.completion_tokens,
        )

    async def aclose(self) -> None:
        return None

    def _answer(self, request: ModelRequest) -> _Answer:
        messages = request.messages
        tools = request.tools or []
        decision = self.policy.decide(messages, _offered(tools))
        log.debug("hermes/local decided %s", type(decision).__name__)
        prompt = sum(estimate_message(m) for m in messages)
        if tools:
            prompt += estimate_tokens(json.dumps(tools, ensure_ascii=False))
        match decision:
            case CallTool(name=name, arguments=arguments):
                args = json.dumps(arguments, ensure_ascii=False)
                call = ToolCallDelta(0, f"call_{uuid.uuid4().hex[:24]}", name, args)
                return _Answer(decision, "", call, prompt, estimate_tokens(name + args))
            case AskForSlot(text=text) | Reply(text=text) | Handoff(text=text):
                return _Answer(decision, text, None, prompt, estimate_tokens(text))
        raise AssertionError(f"unhandled decision {decision!r}")


def _offered(tools: list[dict[str, Any]]) -> set[str]:
    return {str((t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)}


def split_text(text: str, size: int) -> list[str]:
    """Pieces of about `size` characters, cut after punctuation or spaces where possible."""
    pieces: list[str] = []
    current = ""
    for piece in _PIECE.findall(text):
        while len(piece) > 2 * size:  # a long run without a break: cut it
            pieces.extend(p for p in (current, piece[:size]) if p)
            current, piece = "", piece[size:]
        if current and len(current) + len(piece) > size:
            pieces.append(current)
            current = ""
        current += piece
    if current:
        pieces.append(current)
    return [p for p in pieces if p]
