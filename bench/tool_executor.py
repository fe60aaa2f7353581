"""Validation + dispatch overhead per tool call, for a trivial Python tool.

Compares, in the same run, awaiting the handler directly with the same call through the
executor (argument parsing and JSON Schema validation, rules, breaker, rate limit, concurrency
slot, timeout, output validation, masking, truncation, metrics, events). Prints µs p50/p95.

    python bench/tool_executor.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.` handlers resolve

from app.llm.gateway import RequestedToolCall
from app.resilience.breaker import BreakerPolicy
from app.resilience.concurrency import Bulkheads
from app.resilience.ratelimit import RateLimiter
from app.settings import PROJECT_ROOT, ToolSettings
from app.storage.approvals import ApprovalStore
from app.storage.confirmations import ConfirmationStore
from app.storage.session_writer import SessionWriter
from app.storage.sqlite import SqliteDatabase
from app.storage.tool_calls import ToolCallStore
from app.tools.approvals import ApprovalBroker
from app.tools.context import ToolContext, TurnScope
from app.tools.deps import Dependencies
from app.tools.executor import ToolExecutor
from app.tools.flow import ToolGuards
from app.tools.handlers import build_runner
from app.tools.loader import load_tools, resolve_python
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult

TOOLS = """
version: 1
tools:
  - name: echo_order
    description: Echoes an order id back. Read-only; a benchmark tool with no side effects.
    risk: read
    rate_limit: 1000000
    max_concurrency: 64
    parameters:
      type: object
      additionalProperties: false
      required: [order_id]
      properties:
        order_id: {type: string, pattern: "^[0-9]{12}$"}
        verbose: {type: boolean}
    output_schema:
      type: object
      required: [order_id, status]
      properties:
        order_id: {type: string}
        status: {type: string}
    handler: {python: "bench.tool_executor:echo_order"}
"""


async def echo_order(ctx: ToolContext, order_id: str, verbose: bool = False) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


class _Quiet:
    async def started(self, call: RequestedToolCall) -> None:
        return None

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        return None

    async def approval_requested(self, call: RequestedToolCall, approval: Any) -> None:
        return None

    async def approval_resolved(self, call: RequestedToolCall, approval: Any) -> None:
        return None


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    path = folder / "tools.yaml"
    path.write_text(TOOLS)
    registry = ToolRegistry()
    for spec in load_tools(path, resolve=resolve_python):
        registry.register(spec, build_runner(spec, http_client=lambda: None))  # type: ignore[arg-type,return-value]
    migrations = PROJECT_ROOT / "migrations"
    async with SqliteDatabase(folder / "hermes.db", migrations_dir=migrations) as db:
        # The runtime's executor (app/runtime/parts.py); a read touches none of its stores.
        config = ToolSettings()
        policy = BreakerPolicy.from_settings(config)
        executor = ToolExecutor(
            registry,
            deps=Dependencies(),
            guards=ToolGuards(RateLimiter(), Bulkheads(), policy, breakers=None),
            calls=ToolCallStore(db),
            approvals=ApprovalBroker(ApprovalStore(db), timeout_s=5),
            confirmations=ConfirmationStore(db),
            config=config,
        )
        await measure(executor, args.calls)


async def measure(executor: ToolExecutor, calls: int) -> None:
    scope = TurnScope(
        "default", "u1", "ses_bench", "turn_bench", "trace", writer=SessionWriter("ses_bench")
    )
    tools = executor.for_turn(scope, _Quiet())
    arguments = json.dumps({"order_id": "202405201234", "verbose": True})
    ctx = ToolContext(scope, "c", "echo_order", "k", None)

    direct: list[float] = []
    through: list[float] = []
    for _ in range(2000):  # warm-up
        await echo_order(ctx, order_id="202405201234", verbose=True)
        await tools.run_one(RequestedToolCall("c", "echo_order", arguments))
    for i in range(calls):
        t = time.perf_counter()
        await echo_order(ctx, **json.loads(arguments))
        direct.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = await tools.run_one(RequestedToolCall(f"c{i}", "echo_order", arguments))
        through.append(time.perf_counter() - t)
        assert result.status == "success"
    us = 1e6
    print(f"calls: {calls}")
    for name, values in (("direct handler call ", direct), ("through the executor", through)):
        print(f"{name}    p50 {pct(values, 50) * us:8.1f} µs  p95 {pct(values, 95) * us:8.1f} µs")
    print(
        f"overhead per call       p50 {(pct(through, 50) - pct(direct, 50)) * us:8.1f} µs"
        f"  p95 {(pct(through, 95) - pct(direct, 95)) * us:8.1f} µs"
        f"  (mean {(statistics.mean(through) - statistics.mean(direct)) * us:.1f} µs)"
    )


if __name__ == "__main__":
    asyncio.run(main())
