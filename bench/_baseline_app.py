"""The baselines of bench/turn_overhead.py: a bare FastAPI endpoint making one streamed model call
and storing nothing, through LiteLLM or through the `openai` SDK.

    uvicorn --factory bench._baseline_app:litellm_app     # litellm.acompletion(stream=True)
    uvicorn --factory bench._baseline_app:openai_app      # AsyncOpenAI().chat.completions.create

Both send what Hermes sends for a plain turn (system prompt, the user's message, temperature
0.7, max_tokens 2000, usage in the stream) to BENCH_API_BASE. Each is its own process, and the
`openai` one never imports LiteLLM, so neither pays for the other.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from app.settings import DEFAULT_SYSTEM_PROMPT

MODEL = "bench"


class Body(BaseModel):
    content: str


def _messages(content: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": content},
    ]


def _app(complete: Callable[[str], Awaitable[str]]) -> FastAPI:
    app = FastAPI()

    @app.post("/turn")
    async def turn(body: Body) -> dict[str, str]:
        return {"content": await complete(body.content)}

    return app


def litellm_app() -> FastAPI:
    import litellm

    api_base = os.environ["BENCH_API_BASE"]

    async def complete(content: str) -> str:
        stream: Any = await litellm.acompletion(
            model=f"openai/{MODEL}",
            api_base=api_base,
            api_key="sk-bench",
            messages=_messages(content),
            temperature=0.7,
            max_tokens=2000,
            stream=True,
            stream_options={"include_usage": True},
            num_retries=0,
        )
        parts = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        return "".join(parts)

    return _app(complete)


def openai_app() -> FastAPI:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=os.environ["BENCH_API_BASE"], api_key="sk-bench", max_retries=0)

    async def complete(content: str) -> str:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=_messages(content),  # type: ignore[arg-type]
            temperature=0.7,
            max_tokens=2000,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        return "".join(parts)

    return _app(complete)
