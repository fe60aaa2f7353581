"""What one short streamed chat completion costs through each client, in the same run.

A fake OpenAI-compatible server (app.llm.testing.FakeLLMServer, in its own process) answers
every call at once with a five-word reply streamed as server-sent events. Sequential calls,
interleaved in rounds so machine load falls on every client alike, through:

  aiohttp               the transport alone: POST, read the events, decode each chunk's JSON
  httpx + httpx-sse     the same with httpx (what the direct client used first)
  hermes direct         Hermes' OpenAICompatModel (aiohttp + StreamItems, failure mapping)
  openai SDK            openai.AsyncOpenAI().chat.completions.create(stream=True)
  litellm               litellm.acompletion(stream=True)
  hermes litellm        Hermes' LiteLLMModel (the above + StreamItems)

Prints p50/p95 per call and the ratio to the transport alone; then, each in a fresh
interpreter, the time and resident memory that importing each client costs.

    python bench/model_client.py [--calls 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from httpx_sse import EventSource

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "user", "content": "where is my order?"}]
Call = Callable[[], Awaitable[str]]


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port_file = Path(tempfile.mkdtemp(prefix="hermes-model-client-")) / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._fake_llm", "--port-file", str(port_file)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the fake model server did not start")
        time.sleep(0.02)  # waiting for another process to write a file: nothing to await
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


def aiohttp_client(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import aiohttp

    from app.llm.sse import event_data

    holder: dict[str, aiohttp.ClientSession] = {}
    body = {
        "model": "m",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def call() -> str:
        if "s" not in holder:
            holder["s"] = aiohttp.ClientSession()
        text = []
        async with holder["s"].post(f"{base}/chat/completions", json=body) as response:
            async for data in event_data(response.content):
                if data == "[DONE]":
                    break
                for choice in json.loads(data).get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
        return "".join(text)

    async def close() -> None:
        if "s" in holder:
            await holder["s"].close()

    return call, close


def raw_client(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=10))
    body = {
        "model": "m",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def call() -> str:
        text = []
        async with client.stream("POST", f"{base}/chat/completions", json=body) as response:
            async for event in EventSource(response).aiter_sse():
                if event.data == "[DONE]":
                    break
                chunk = json.loads(event.data)
                for choice in chunk.get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
        return "".join(text)

    return call, client.aclose


def hermes_direct(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from app.llm.catalog import Direct, ModelConfig, route
    from app.llm.clients import ModelClients
    from app.llm.gateway import ModelRequest, collect
    from app.llm.openai_compat import OpenAICompatModel
    from app.settings import ModelSettings

    target = route(ModelConfig("openai/m", base, "sk-bench"))
    assert isinstance(target, Direct)
    defaults = ModelSettings()
    clients = ModelClients(max_connections=defaults.max_connections, timeout_s=defaults.timeout_s)
    model = OpenAICompatModel("openai/m", target, clients)
    request = ModelRequest(messages=MESSAGES)

    async def call() -> str:
        return (await collect(model.stream(request))).text

    return call, model.aclose


def openai_sdk(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import openai

    client = openai.AsyncOpenAI(base_url=base, api_key="sk-bench", max_retries=0)

    async def call() -> str:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        text = []
        async for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
        return "".join(text)

    return call, client.close


def litellm_call(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from app.llm.litellm_gateway import import_litellm

    litellm = import_litellm()

    async def call() -> str:
        response = await litellm.acompletion(
            model="openai/m",
            api_base=base,
            api_key="sk-bench",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            num_retries=0,
        )
        text = []
        async for chunk in response:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
        return "".join(text)

    async def close() -> None:
        return None

    return call, close


def hermes_litellm(base: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from app.llm.gateway import ModelRequest, collect
    from app.llm.litellm_gateway import LiteLLMModel, ModelConfig
    from app.settings import ModelSettings

    config = ModelConfig("openai/m", base, "sk-bench")
    model = LiteLLMModel(config, timeout_s=ModelSettings().timeout_s)
    request = ModelRequest(messages=MESSAGES)

    async def call() -> str:
        return (await collect(model.stream(request))).text

    return call, model.aclose


CLIENTS: dict[str, Callable[[str], tuple[Call, Callable[[], Awaitable[None]]]]] = {
    "aiohttp": aiohttp_client,
    "httpx + httpx-sse": raw_client,
    "hermes direct": hermes_direct,
    "openai SDK": openai_sdk,
    "litellm": litellm_call,
    "hermes litellm": hermes_litellm,
}

IMPORTS = {
    "aiohttp": "import aiohttp",
    "httpx + httpx-sse": "import httpx, httpx_sse",
    "openai SDK": "import openai",
    "litellm": "from app.llm.litellm_gateway import import_litellm; import_litellm()",
}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def measure(base: str, calls: int, rounds: int) -> dict[str, list[float]]:
    clients = {name: make(base) for name, make in CLIENTS.items()}
    for call, _ in clients.values():  # warm-up: first calls build pools, caches, lazy imports
        for _ in range(20):
            if not await call():
                raise RuntimeError("empty reply")
    times: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, (call, _) in clients.items():
            for _ in range(calls // rounds):
                t = time.perf_counter()
                await call()
                times[name].append(time.perf_counter() - t)
    for _, close in clients.values():
        await close()
    return times


def import_cost(statement: str) -> tuple[float, float]:
    """(seconds, MB of RSS added) to run `statement` in a fresh interpreter."""
    code = (
        "import time, re\n"
        "def rss():\n"
        "    s = open('/proc/self/status').read()\n"
        "    return int(re.search(r'VmRSS:\\s+(\\d+)', s)[1]) / 1024\n"
        "r0 = rss(); t = time.perf_counter()\n"
        f"{statement}\n"
        "print(time.perf_counter() - t, rss() - r0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    seconds, mb = out.stdout.split()
    return float(seconds), float(mb)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    proc, base = start_server()
    try:
        times = asyncio.run(measure(base, args.calls, args.rounds))
    finally:
        proc.terminate()
        proc.wait()
    floor = statistics.median(times["aiohttp"])
    print(f"{args.calls} sequential short streamed completions each; load {os.getloadavg()[0]:.2f}")
    print(f"{'client':<20} {'p50 ms':>8} {'p95 ms':>8} {'x transport':>12}")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"{name:<20} {p50 * 1000:8.2f} {pct(values, 95) * 1000:8.2f} {p50 / floor:12.2f}")
    print(f"{'import (fresh)':<20} {'s':>8} {'+RSS MB':>8}")
    for name, statement in IMPORTS.items():
        seconds, mb = import_cost(statement)
        print(f"{name:<20} {seconds:8.2f} {mb:8.1f}")


if __name__ == "__main__":
    main()
