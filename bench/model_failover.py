"""What a turn costs when the primary model is down and `hermes/local` answers instead.

Runs Hermes in-process on a real socket, twice, with the default retry and timeout settings:
once with `hermes/local` as the configured model (the floor: no remote model at all), once
with an unreachable primary (`openai/primary` on a closed 127.0.0.1 port) and the local
fallback. Prints per-turn latency of the first turn and the steady state after it, and the
ratio failover/direct: near 1 means a dead primary no longer costs every turn.

    python -m bench.model_failover [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.settings import Settings
from app.testing import serve

QUESTIONS = ["你好", "where is my order 202405201234", "hello", "我的订单到哪了"]


def closed_port() -> int:
    """A port nothing listens on: bound, read, and released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_turns(settings: Settings, turns: int) -> list[float]:
    latencies: list[float] = []
    async with serve(settings) as svc:
        r = await svc.client.post("/v1/sessions", json={"user_id": "bench"})
        session_id = r.json()["id"]
        for i in range(turns):
            t = time.perf_counter()
            r = await svc.client.post(
                f"/v1/sessions/{session_id}/messages",
                json={"content": QUESTIONS[i % len(QUESTIONS)]},
                timeout=120,
            )
            latencies.append(time.perf_counter() - t)
            body = r.json()
            if r.status_code != 200 or body.get("model") != "hermes/local":
                raise RuntimeError(f"turn {i} was not answered by hermes/local: {r.text[:300]}")
    return latencies


def settings_for(tmp: Path, name: str, **overrides: Any) -> Settings:
    return Settings(
        db_path=tmp / f"{name}.db",
        demo_db_path=tmp / "demo.db",
        log_level="WARNING",
        log_json=False,
        **overrides,
    )


def report(name: str, latencies: list[float]) -> float:
    rest = latencies[1:]
    steady = statistics.median(rest)
    print(
        f"{name:<22} first {latencies[0] * 1000:9.1f} ms   steady p50 {steady * 1000:8.1f} ms"
        f"   max {max(rest) * 1000:8.1f} ms"
    )
    return steady


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="hermes-failover-"))
    direct = await run_turns(settings_for(tmp, "direct", model="hermes/local"), args.turns)
    failover = await run_turns(
        settings_for(
            tmp,
            "failover",
            model="openai/primary",
            model_api_base=f"http://127.0.0.1:{closed_port()}/v1",
            model_api_key="sk-bench",
            local_fallback=True,
        ),
        args.turns,
    )
    print(f"{args.turns} sequential turns each, one session, default retry/timeout settings")
    floor = report("hermes/local direct", direct)
    steady = report("dead primary -> local", failover)
    print(f"ratio failover/direct (steady p50)  {steady / floor:8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
