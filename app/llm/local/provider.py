"""`hermes/local`: the dialogue policy served as a LiteLLM custom provider.

`register(parser)` installs the provider in `litellm.custom_provider_map`; it must run before
a Router lists `hermes/local` (the Router resolves providers when it is built). Text streams in
several chunks; a tool call comes back in the OpenAI shape, streamed as a `tool_use` chunk.

LiteLLM strips the provider prefix from the model name it hands to a custom provider and puts
on the chunks it builds itself, so streamed chunks say `local`; the full model string is on
the stream's `_hidden_params["litellm_model_name"]`. Non-streamed responses say `hermes/local`.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from app.conversation.tokens import estimate_message, estimate_tokens
from app.llm.litellm_gateway import ModelConfig, import_litellm
from app.llm.local.policy import AskForSlot, CallTool, Decision, DialoguePolicy, Handoff, Reply
from app.nlu.types import Parser

litellm = import_litellm()
from litellm import CustomLLM  # noqa: E402  (after import_litellm has set the environment)
from litellm.llms.custom_llm import CustomLLMError  # noqa: E402
from litellm.types.utils import (  # noqa: E402
    ChatCompletionMessageToolCall,
    Choices,
    Function,
    GenericStreamingChunk,
    Message,
    ModelResponse,
    Usage,
)

log = logging.getLogger(__name__)

PROVIDER = "hermes"
LOCAL_MODEL = f"{PROVIDER}/local"
_NAME = "local"
# Clause ends: text streams in pieces that end at punctuation or spaces where it can.
_PIECE = re.compile(r"[^，。！？；：、,.!?;:\s]*[，。！？；：、,.!?;:\s]*")


@dataclass(frozen=True)
class LocalModelConfig:
    min_confidence: float = 0.5  # below it the offline model hands off (HERMES_NLU_MIN_CONFIDENCE)
    chunk_chars: int = 12  # about this much text per streamed chunk


@dataclass(frozen=True)
class _Answer:
    decision: Decision
    text: str
    call: dict[str, Any] | None  # an OpenAI tool call, when the decision is CallTool
    prompt_tokens: int
    completion_tokens: int

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.call else "stop"

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


class HermesLocalLLM(CustomLLM):
    def __init__(self, policy: DialoguePolicy, config: LocalModelConfig) -> None:
        super().__init__()
        self.policy = policy
        self.config = config

    # LiteLLM calls these with keyword arguments only; the ones used here are read by name.

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._response(kwargs["model_response"], self._answer(kwargs))

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._response(kwargs["model_response"], self._answer(kwargs))

    def streaming(self, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        yield from self._chunks(self._answer(kwargs))

    # LiteLLM declares astreaming as a coroutine but iterates what it returns: a generator works.
    async def astreaming(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        for chunk in self._chunks(self._answer(kwargs)):
            yield chunk

    # -- the answer ---------------------------------------------------------------------------

    def _answer(self, kwargs: dict[str, Any]) -> _Answer:
        if kwargs.get("model") != _NAME:
            raise CustomLLMError(404, f"unknown model {PROVIDER}/{kwargs.get('model')}")
        messages: list[dict[str, Any]] = list(kwargs.get("messages") or [])
        params: dict[str, Any] = kwargs.get("optional_params") or {}
        tools = params.get("tools") or []
        decision = self.policy.decide(messages, _offered(tools, params.get("tool_choice")))
        log.debug("hermes/local decided %s", type(decision).__name__)
        prompt = sum(estimate_message(m) for m in messages)
        if tools:
            prompt += estimate_tokens(json.dumps(tools, ensure_ascii=False))
        match decision:
            case CallTool(name=name, arguments=arguments):
                args = json.dumps(arguments, ensure_ascii=False)
                call = {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                return _Answer(decision, "", call, prompt, estimate_tokens(name + args))
            case AskForSlot(text=text) | Reply(text=text) | Handoff(text=text):
                return _Answer(decision, text, None, prompt, estimate_tokens(text))
        raise AssertionError(f"unhandled decision {decision!r}")

    def _response(self, response: ModelResponse, answer: _Answer) -> ModelResponse:
        tool_calls = None
        if answer.call:
            fn = answer.call["function"]
            tool_calls = [
                ChatCompletionMessageToolCall(
                    id=answer.call["id"],
                    type="function",
                    function=Function(name=fn["name"], arguments=fn["arguments"]),
                )
            ]
        message = Message(content=answer.text or None, role="assistant", tool_calls=tool_calls)
        response.choices = [Choices(index=0, finish_reason=answer.finish_reason, message=message)]
        response.model = LOCAL_MODEL
        usage = Usage(
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            total_tokens=answer.prompt_tokens + answer.completion_tokens,
        )
        setattr(response, "usage", usage)  # noqa: B010  (not a declared field of ModelResponse)
        return response

    def _chunks(self, answer: _Answer) -> Iterator[GenericStreamingChunk]:
        for piece in split_text(answer.text, self.config.chunk_chars):
            yield _chunk(text=piece)
        if answer.call:
            yield _chunk(tool_use={**answer.call, "index": 0})
        yield _chunk(is_finished=True, finish_reason=answer.finish_reason, usage=answer.usage())


def _chunk(
    text: str = "",
    tool_use: dict[str, Any] | None = None,
    is_finished: bool = False,
    finish_reason: str = "",
    usage: dict[str, int] | None = None,
) -> GenericStreamingChunk:
    chunk: dict[str, Any] = {
        "text": text,
        "tool_use": tool_use,
        "is_finished": is_finished,
        "finish_reason": finish_reason,
        "usage": usage,
        "index": 0,
    }
    return chunk  # type: ignore[return-value]


def _offered(tools: list[dict[str, Any]], tool_choice: Any) -> set[str]:
    names = {str((t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)}
    if tool_choice == "none":
        return set()
    if isinstance(tool_choice, dict):
        chosen = (tool_choice.get("function") or {}).get("name")
        return names & {chosen}
    return names


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


def register(parser: Parser, config: LocalModelConfig | None = None) -> HermesLocalLLM:
    """Serve `hermes/local` with `parser`; calling it again replaces the earlier handler."""
    config = config or LocalModelConfig()
    handler = HermesLocalLLM(DialoguePolicy(parser, config.min_confidence), config)
    others = [e for e in litellm.custom_provider_map if e.get("provider") != PROVIDER]
    litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": handler}]
    return handler


def unregister(handler: HermesLocalLLM) -> None:
    """Remove `handler` (at shutdown); a handler registered since then stays."""
    litellm.custom_provider_map = [
        e for e in litellm.custom_provider_map if e.get("custom_handler") is not handler
    ]


def with_local_fallback(primary: ModelConfig, fallbacks: list[ModelConfig]) -> list[ModelConfig]:
    """`fallbacks` with `hermes/local` last, unless the local model is already in the chain."""
    if LOCAL_MODEL in {primary.model, *(f.model for f in fallbacks)}:
        return list(fallbacks)
    return [*fallbacks, ModelConfig(LOCAL_MODEL)]
