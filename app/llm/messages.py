"""Chat messages inside Hermes, typed: the OpenAI chat-completions shape as `TypedDict`s.

They are plain dicts at run time, so the turn loop, the context budget and the model gateways
share one shape at no cost; mypy checks the keys and roles. Code that must also read messages
from elsewhere (a provider library calling the `hermes/local` model) takes
`Sequence[Mapping[str, Any]]`, which these satisfy.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # raw JSON text as the model produced it; may be malformed


class ToolCallPart(TypedDict):
    """One tool call inside an assistant message."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str
    name: NotRequired[str]  # set on quoted data, e.g. the recalled-memory block


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None  # None when the message only calls tools
    tool_calls: NotRequired[list[ToolCallPart]]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str
    name: NotRequired[str]


ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage
