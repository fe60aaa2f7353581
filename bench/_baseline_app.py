"""The baseline for bench/turn_overhead.py: a bare FastAPI endpoint making the same LiteLLM call
Hermes makes (Router, streaming, same parameters) and storing nothing."""

from __future__ import annotations

import os

from fastapi import FastAPI
from pydantic import BaseModel

from app.llm.gateway import ModelRequest, collect
from app.llm.litellm_gateway import LiteLLMGateway, ModelConfig
from app.settings import DEFAULT_SYSTEM_PROMPT

gateway = LiteLLMGateway(
    ModelConfig("openai/bench", os.environ["BENCH_API_BASE"], "sk-bench"), [], retries=0
)
app = FastAPI()


class Body(BaseModel):
    content: str


@app.post("/turn")
async def turn(body: Body) -> dict[str, str]:
    request = ModelRequest(
        messages=[
            {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": body.content},
        ],
        tools=None,
        temperature=0.7,
        max_tokens=2000,
    )
    reply = await collect(gateway.stream(request))
    return {"content": reply.text}
