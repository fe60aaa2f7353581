"""The load generator of bench/load.py, run in its own process: simulated customers, each in one
session, taking turns over SSE with think time between them.

    python bench/_load_users.py PLAN.json RESULT.json

The plan names the service, the users (each a demo customer with their orders and parcels),
when to start, the ramp-up, the measured window and the task mix. A turn is timed from just
before its POST to the parsed `turn.completed` frame; `turn.failed`, a non-200 answer, a
transport error, a timeout or a stream that ends without a terminal frame is a failure. The
result lists every turn (task, start time, seconds, failure or None, tool outcomes) and this
process's own CPU time. Imports stay light: no Hermes code runs in this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx

# (task, weight): the articles' call-centre mix.
MIX = (("order_status", 60), ("password_reset", 20), ("shipment", 15), ("complaint", 5))

# Each message's NLU intent offers the tool its task needs (the offered-set rule).
MESSAGES: dict[str, tuple[str, ...]] = {
    "order_status": (
        "Where is my order {order}?",
        "Can you check the status of order {order}?",
        "我的订单{order}什么时候发货",
    ),
    "password_reset": (
        "I forgot my password, can you reset it?",
        "I can't log in, please reset my password",
        "忘记密码了，帮我重置一下",
    ),
    "shipment": (
        "Where is my parcel {parcel}?",
        "Please track my package {parcel}",
        "快递单号{parcel}到哪了",
    ),
    "complaint": (
        "I want to complain: the courier left my parcel at the door and it is gone",
        "I want to file a complaint, your delivery service is terrible",
        "我要投诉，快递员态度太差了",
    ),
}

TRACKING = r"^[A-Z]{2}\d{9,12}[A-Z]{0,2}$"

Turn = tuple[str, float, float, str | None, list[tuple[str, str]]]


def customers(demo_db: Path) -> list[dict[str, Any]]:
    """Demo customers with at least one order and one trackable parcel, with both lists."""
    pattern = re.compile(TRACKING)
    with sqlite3.connect(demo_db) as conn:
        rows = conn.execute(
            "SELECT o.customer_id, o.id, s.tracking_number FROM orders o"
            " LEFT JOIN shipments s ON s.order_id = o.id ORDER BY o.customer_id, o.id"
        ).fetchall()
    found: dict[str, dict[str, Any]] = {}
    for customer, order, parcel in rows:
        entry = found.setdefault(customer, {"customer": customer, "orders": [], "parcels": []})
        entry["orders"].append(order)
        if parcel and pattern.match(parcel):
            entry["parcels"].append(parcel)
    return [c for c in found.values() if c["orders"] and c["parcels"]]


async def take_turn(
    client: httpx.AsyncClient, session_id: str, task: str, text: str, timeout_s: float
) -> Turn:
    started, start = time.time(), time.perf_counter()
    failure: str | None = "no terminal frame"
    tools: list[tuple[str, str]] = []
    try:
        async with asyncio.timeout(timeout_s):
            failure, tools = await _stream(client, session_id, text)
    except TimeoutError:
        failure = f"no terminal frame within {timeout_s:g}s"
    except httpx.HTTPError as exc:
        failure = f"transport: {type(exc).__name__}"
    return task, started, time.perf_counter() - start, failure, tools


async def _stream(
    client: httpx.AsyncClient, session_id: str, text: str
) -> tuple[str | None, list[tuple[str, str]]]:
    tools: list[tuple[str, str]] = []
    event = ""
    async with client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": text},
        headers={"Accept": "text/event-stream"},
    ) as response:
        if response.status_code != 200:
            await response.aread()
            return f"http {response.status_code}", tools
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                if event == "turn.completed":
                    return None, tools
            elif line.startswith("data:") and event in ("tool.completed", "turn.failed"):
                data = json.loads(line[5:])
                if event == "turn.failed":
                    return f"turn.failed: {data.get('code', '?')}", tools
                status = str(data.get("status"))
                if status != "success":
                    code = ((data.get("result") or {}).get("error") or {}).get("code")
                    status = f"{status}: {code}" if code else status
                tools.append((str(data.get("tool")), status))
    return "no terminal frame", tools


async def user(client: httpx.AsyncClient, plan: dict[str, Any], me: dict[str, Any]) -> list[Turn]:
    rng = random.Random(plan["seed"] * 100_003 + me["index"])
    tasks, weights = zip(*MIX, strict=True)
    begin = plan["start_at"] + me["index"] * plan["ramp_s"] / max(1, plan["users_total"])
    stop_at = plan["start_at"] + plan["ramp_s"] + plan["duration_s"]
    await asyncio.sleep(max(0.0, begin - time.time()))
    made = await client.post("/v1/sessions", json={"user_id": me["customer"]})
    if made.status_code != 201:
        return [("session", time.time(), 0.0, f"http {made.status_code}", [])]
    session_id = made.json()["id"]
    turns: list[Turn] = []
    while time.time() < stop_at:
        task = rng.choices(tasks, weights)[0]
        text = rng.choice(MESSAGES[task]).format(
            order=rng.choice(me["orders"]), parcel=rng.choice(me["parcels"])
        )
        turns.append(await take_turn(client, session_id, task, text, plan["turn_timeout_s"]))
        think = max(0.0, rng.gauss(plan["think_mean_s"], plan["think_sd_s"]))
        await asyncio.sleep(min(think, max(0.0, stop_at - time.time())))  # no idle drain
    return turns


async def run(plan: dict[str, Any]) -> list[Turn]:
    n = len(plan["users"])
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    timeout = httpx.Timeout(plan["turn_timeout_s"], connect=10.0)
    async with httpx.AsyncClient(base_url=plan["base_url"], limits=limits, timeout=timeout) as c:
        per_user = await asyncio.gather(*(user(c, plan, me) for me in plan["users"]))
    return [t for turns in per_user for t in turns]


def main() -> None:
    plan_path, result_path = sys.argv[1], sys.argv[2]
    with open(plan_path) as f:
        plan = json.load(f)
    turns = asyncio.run(run(plan))
    with open(result_path + ".tmp", "w") as f:
        json.dump({"turns": turns, "cpu_s": time.process_time()}, f)
    os.replace(result_path + ".tmp", result_path)


if __name__ == "__main__":
    main()
