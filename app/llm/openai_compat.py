"""`ChatModel` for an OpenAI-compatible chat-completions endpoint, without LiteLLM.

OpenAI itself, DeepSeek, Qwen's compatible mode, vLLM, llama.cpp's server, Ollama's `/v1`: one
streamed `POST …/chat/completions` per try, read as server-sent events. The transport is
aiohttp with a small event reader (`app.llm.sse`), chosen by measurement (bench/model_client.py):
per short streamed completion from a local server it costs about a third of httpx with
`httpx-sse`, a sixth of the `openai` SDK and a thirtieth of `litellm.acompletion`, and under
the 200-agent load the httpx client was a quarter of the event loop's time.

Like the LiteLLM path, a call is one try: retries, fallbacks, timeouts and breakers are the
chain's (`app.llm.chain`). HTTP statuses, connection errors, timeouts, broken and malformed
streams become the same `ModelFailure` codes the LiteLLM path gives.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp

from app import __version__
from app.errors import InternalError
from app.llm.catalog import Direct
from app.llm.clients import ModelClients
from app.llm.failures import (
    ModelFailure,
    code_for_status,
    parse_retry_after,
    says_context_too_long,
)
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta
from app.llm.sse import event_data


class _Malformed(InternalError):
    """An event the stream should not contain."""


class OpenAICompatModel:
    def __init__(
        self,
        name: str,
        target: Direct,
        clients: ModelClients,
        *,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.name = name  # as configured, e.g. deepseek/deepseek-chat
        self._target = target
        self._clients = clients
        clients.lease(target.base_url)
        self._leased = True
        self._url = f"{target.base_url}/chat/completions"
        self._headers = {"Accept": "text/event-stream", "User-Agent": f"hermes-agent/{__version__}"}
        if target.api_key:
            self._headers["Authorization"] = f"Bearer {target.api_key}"
        self._extra = dict(extra or {})

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if not self._leased:
            raise ModelFailure("llm_unavailable", self.name, detail="the model was closed")
        if self._target.needs_key and not self._target.api_key:
            raise ModelFailure("llm_no_api_key", self.name)
        session = self._clients.session(self._target.base_url)
        answered = False  # the response's headers arrived: a break from here broke the stream
        try:
            async with session.post(
                self._url, json=self._body(request), headers=self._headers
            ) as response:
                answered = True
                if response.status >= 400:
                    raise await self._refused(response)
                async with contextlib.aclosing(self._items(response)) as items:
                    async for item in items:
                        yield item
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise ModelFailure("llm_timeout", self.name) from None
        except (aiohttp.ClientError, ConnectionError) as exc:
            code = "llm_stream_interrupted" if answered else "llm_unreachable"
            raise ModelFailure(code, self.name, detail=type(exc).__name__) from None
        except (_Malformed, UnicodeDecodeError) as exc:
            raise ModelFailure("llm_unavailable", self.name, detail=str(exc)) from None

    async def aclose(self) -> None:
        if self._leased:
            self._leased = False
            await self._clients.release(self._target.base_url)

    # -- internals ------------------------------------------------------------------------------

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        return {"model": self._target.wire_model, **self._extra, **request.chat_params()}

    async def _refused(self, response: aiohttp.ClientResponse) -> ModelFailure:
        status = response.status
        message, kind = _error_text(await response.read())
        code = code_for_status(status)
        if 400 <= status < 500 and status != 429 and says_context_too_long(f"{kind} {message}"):
            code = "llm_context_too_long"
        return ModelFailure(
            code,
            self.name,
            status=status,
            detail=message,
            retry_after=parse_retry_after(response.headers),
        )

    async def _items(self, response: aiohttp.ClientResponse) -> AsyncGenerator[StreamItem, None]:
        if not response.content_type.startswith("text/event-stream"):
            raise _Malformed(f"the answer is {response.content_type}, not an event stream")
        finish: str | None = None
        reported: str | None = None
        usage: tuple[int, int] = (0, 0)
        done = False
        async with contextlib.aclosing(event_data(response.content)) as events:
            async for data in events:
                if data == "[DONE]":
                    done = True
                    break
                if not data:
                    continue
                chunk = _decode(data)
                if "error" in chunk:
                    raise _stream_error(chunk["error"], self.name)
                try:
                    items, chunk_finish, chunk_usage = _read(chunk)
                except (AttributeError, TypeError, ValueError):
                    raise _Malformed("an event of an unexpected shape") from None
                reported = chunk.get("model") or reported
                finish = chunk_finish or finish
                usage = chunk_usage or usage
                for item in items:
                    yield item
        if not done and finish is None:
            # A stream that stops without saying it is finished was cut off somewhere.
            raise ModelFailure(
                "llm_stream_interrupted", self.name, detail="the stream ended unfinished"
            )
        yield StreamEnd(finish, reported, *usage)


def _decode(data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError:
        raise _Malformed("malformed event data") from None
    if not isinstance(chunk, dict):
        raise _Malformed("an event of an unexpected shape")
    return chunk


def _read(chunk: dict[str, Any]) -> tuple[list[StreamItem], str | None, tuple[int, int] | None]:
    """The deltas, finish reason and usage (prompt, completion) one chunk carries."""
    usage = chunk.get("usage")
    tokens = (
        (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
        if usage
        else None
    )
    choices = chunk.get("choices") or []
    if not choices:
        return [], None, tokens
    choice = choices[0]
    delta = choice.get("delta") or {}
    items: list[StreamItem] = []
    content = delta.get("content")
    if content:
        items.append(TextDelta(str(content)))
    for call in delta.get("tool_calls") or ():
        fn = call.get("function") or {}
        items.append(
            ToolCallDelta(
                index=int(call.get("index") or 0),
                id=call.get("id"),
                name=fn.get("name"),
                arguments=fn.get("arguments") or "",
            )
        )
    return items, choice.get("finish_reason"), tokens


def _error_text(raw: bytes) -> tuple[str, str]:
    """(message, code or type) of an error answer, whatever shape its body has."""
    text = raw.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500], ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("code") or error.get("type") or ""
        return str(error.get("message") or ""), str(kind)
    if isinstance(error, str):
        return error, ""
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"]), ""
    return text[:500], ""


def _stream_error(error: Any, model: str) -> ModelFailure:
    """An error the server sent inside the stream (vLLM and OpenAI do, after a 200)."""
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        status = error.get("code") if isinstance(error.get("code"), int) else None
    else:
        message, status = str(error), None
    code = code_for_status(status) if status else "llm_unavailable"
    return ModelFailure(code, model, status=status, detail=message)
