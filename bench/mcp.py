"""MCP call overhead: a call through Hermes' MCP runner vs a direct SDK `Client` call.

The same scripted server (tests/mcp_servers/scripted_server.py), over stdio and over
streamable HTTP on 127.0.0.1. Hermes' path is what the executor awaits for an MCP tool: the
registered runner (breaker check, timeout, idempotency key in `_meta`, error mapping, result
adaptation) over the connection the manager keeps. Direct is `await client.call_tool(...)` on
an SDK client of its own. Calls alternate between the two after a warm-up, so both see the
same machine load. Prints ms p50/p95 and the difference.

    python bench/mcp.py [--calls 500] [--warmup 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, and this file is named `mcp`:
# take the folder out so `import mcp` finds the SDK, and put the repository in.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from app.settings import Settings  # noqa: E402
from app.storage.session_writer import SessionWriter  # noqa: E402
from app.tools.context import ToolContext, TurnScope  # noqa: E402
from app.tools.mcp.config import parse_mcp_config  # noqa: E402
from app.tools.mcp.manager import McpManager  # noqa: E402
from app.tools.registry import ToolRegistry  # noqa: E402
from tests.mcp_servers.processes import SCRIPTED_SERVER, http_server  # noqa: E402

ARGS = {"text": "order 202405201234 shipped"}
Call = Callable[[], Awaitable[Any]]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@contextlib.asynccontextmanager
async def hermes(entry: dict[str, Any]) -> AsyncIterator[Call]:
    registry = ToolRegistry()
    config = parse_mcp_config({"mcpServers": {"bench": {**entry, "trust": "trusted"}}})
    manager = McpManager(config, registry, Settings())
    await manager.start()
    try:
        if not await manager.wait_connected("bench", 60):
            raise RuntimeError(f"no connection: {manager.server_status('bench')}")
        tool = registry.get("mcp__bench__echo")
        assert tool is not None
        ctx = ToolContext(
            TurnScope("default", "u1", "s1", "t1", writer=SessionWriter("s1")),
            "c1",
            tool.spec.name,
            "idem_b",
            None,
        )
        yield lambda: tool.run(ctx, dict(ARGS))
    finally:
        await manager.aclose()


@contextlib.asynccontextmanager
async def direct(server: str | StdioServerParameters) -> AsyncIterator[Call]:
    async with Client(server) as client:
        yield lambda: client.call_tool("echo", dict(ARGS))


async def measure(
    label: str, direct_call: Call, hermes_call: Call, calls: int, warmup: int
) -> None:
    for _ in range(warmup):
        await direct_call()
        await hermes_call()
    plain: list[float] = []
    through: list[float] = []
    for _ in range(calls):
        t = time.perf_counter()
        await direct_call()
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = await hermes_call()
        through.append(time.perf_counter() - t)
        assert result == {"result": ARGS["text"]}, result
    ms = 1e3
    print(f"{label}  ({calls} calls each, after {warmup} warm-up)")
    for name, values in (
        ("direct SDK Client.call_tool", plain),
        ("through Hermes' MCP runner", through),
    ):
        print(
            f"  {name:28s} p50 {pct(values, 50) * ms:7.3f} ms  p95 {pct(values, 95) * ms:7.3f} ms"
        )
    print(
        f"  {'added by Hermes':28s} p50 {(pct(through, 50) - pct(plain, 50)) * ms:7.3f} ms"
        f"  p95 {(pct(through, 95) - pct(plain, 95)) * ms:7.3f} ms"
        f"  (mean {(statistics.mean(through) - statistics.mean(plain)) * ms:.3f} ms)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()

    stdio = {"command": sys.executable, "args": [str(SCRIPTED_SERVER)]}
    params = StdioServerParameters(command=sys.executable, args=[str(SCRIPTED_SERVER)])
    async with direct(params) as d, hermes(stdio) as h:
        await measure("stdio (one server process per client)", d, h, args.calls, args.warmup)

    async with http_server() as server:
        async with direct(server.url) as d, hermes({"url": server.url}) as h:
            await measure(
                "streamable HTTP (one server process, 127.0.0.1)", d, h, args.calls, args.warmup
            )


if __name__ == "__main__":
    asyncio.run(main())
