"""The seam between the turn loop and whatever answers as the model.

`ChatModel.stream` yields text deltas, tool-call fragments and one `StreamEnd`; `collect`
assembles them into a `ModelReply`, calling back on every text delta so the caller can stream
it on. Implementations raise `UpstreamLLMError` when the model can't answer. A model that
stands for several (`app.llm.chain.ModelChain`) says on its `StreamEnd.route` which of them
answered and which were tried or skipped first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from app.errors import UpstreamLLMError
from app.llm.messages import ChatMessage, ToolCallPart

Phase = Literal["planning", "tools", "text"]


@dataclass(frozen=True)
class ModelRequest:
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] | None = None
    phase: Phase = "tools"
    temperature: float | None = None
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def chat_params(self) -> dict[str, Any]:
        """The request as OpenAI chat-completion parameters for a streamed call (usage
        included); options left unset are left out, so the provider's defaults apply."""
        params: dict[str, Any] = {
            "messages": self.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.tools:
            params["tools"] = self.tools
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        return params


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class Attempt:
    """One configured model's part in a call: `answered`, `skipped` (its breaker is open), or
    the failure code of its last try."""

    model: str
    outcome: str
    tries: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "outcome": self.outcome, "tries": self.tries}


@dataclass(frozen=True)
class ModelRoute:
    """Which configured model answered (None: none did) and what happened before it."""

    answered_by: str | None
    attempts: tuple[Attempt, ...] = ()

    def trace(self) -> list[dict[str, Any]]:
        return [a.as_dict() for a in self.attempts]


@dataclass(frozen=True)
class StreamEnd:
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    route: ModelRoute | None = None


StreamItem = TextDelta | ToolCallDelta | StreamEnd


class ChatModel(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]: ...

    async def aclose(self) -> None: ...


async def close_stream(stream: AsyncIterator[StreamItem]) -> None:
    """Close a model's stream early (its connection goes back or is dropped), if it can be."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def tap_route(
    stream: AsyncIterator[StreamItem], seen: list[ModelRoute]
) -> AsyncIterator[StreamItem]:
    """`stream` unchanged, noting on `seen` the route its `StreamEnd` carries."""
    async for item in stream:
        if isinstance(item, StreamEnd) and item.route is not None:
            seen.append(item.route)
        yield item


@dataclass(frozen=True)
class RequestedToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; may be malformed

    def as_message_part(self) -> ToolCallPart:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: list[RequestedToolCall]
    finish_reason: str | None
    model: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


async def collect(
    stream: AsyncIterator[StreamItem],
    on_text: Callable[[str], Awaitable[None]] | None = None,
) -> ModelReply:
    """Assemble a streamed answer; `on_text` sees each text delta as it arrives."""
    text: list[str] = []
    calls: dict[int, _PartialCall] = {}
    end = StreamEnd()
    async for item in stream:
        match item:
            case TextDelta(text=piece) if piece:
                text.append(piece)
                if on_text is not None:
                    await on_text(piece)
            case ToolCallDelta(index=index, id=call_id, name=name, arguments=args):
                partial = calls.setdefault(index, _PartialCall())
                if call_id:
                    partial.id = call_id
                if name:
                    partial.name += name
                if args:
                    partial.arguments.append(args)
            case StreamEnd():
                end = item
    tool_calls = []
    taken = {p.id for p in calls.values() if p.id}
    used: set[str] = set()
    for index in sorted(calls):
        partial = calls[index]
        if not partial.name:
            raise UpstreamLLMError(
                "the model sent a tool call without a name", code="llm_bad_response"
            )
        call_id = partial.id or f"call_{index}"
        if call_id in used:
            # Results are matched to calls by id (tool messages, steps, idempotency keys): two
            # calls sharing one would get one call's result twice. A repeat gets a new id.
            call_id = _distinct(call_id, used | taken)
        used.add(call_id)
        tool_calls.append(
            RequestedToolCall(id=call_id, name=partial.name, arguments="".join(partial.arguments))
        )
    return ModelReply(
        text="".join(text),
        tool_calls=tool_calls,
        finish_reason=end.finish_reason,
        model=end.model,
        prompt_tokens=end.prompt_tokens,
        completion_tokens=end.completion_tokens,
    )


def _distinct(call_id: str, taken: set[str]) -> str:
    n = 2
    while f"{call_id}_{n}" in taken:
        n += 1
    return f"{call_id}_{n}"
