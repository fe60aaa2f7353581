"""What a Hermes turn costs on top of the model call itself.

Runs, in one go and on the same machine: a fake OpenAI-compatible model server that answers
instantly; Hermes (`hermes serve`, SQLite WAL, full turn: session, messages, events, snapshot);
and a bare FastAPI endpoint making the same LiteLLM call and storing nothing. Prints turns/s of
both at a fixed concurrency, the ratio, and per-turn latency p50/p95 sequentially, with the
latency Hermes adds.

    python bench/turn_overhead.py [--turns 300] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                await client.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def hermes_turns(
    base: str, turns: int, concurrency: int, per_session: int
) -> tuple[float, list[float]]:
    """Each worker talks in sessions of `per_session` turns (a call), then opens a new one."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        latencies: list[float] = []

        async def worker(n: int, who: int) -> None:
            session_id = ""
            for i in range(n):
                if i % per_session == 0:
                    r = await client.post("/v1/sessions", json={"user_id": f"bench{who}"})
                    session_id = r.json()["id"]
                t = time.perf_counter()
                r = await client.post(
                    f"/v1/sessions/{session_id}/messages",
                    json={"content": f"where is my order {i}"},
                )
                r.raise_for_status()
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker(turns // concurrency, w) for w in range(concurrency)))
        return time.perf_counter() - start, latencies


async def baseline_turns(base: str, turns: int, concurrency: int) -> tuple[float, list[float]]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        latencies: list[float] = []

        async def worker(n: int) -> None:
            for i in range(n):
                t = time.perf_counter()
                r = await client.post("/turn", json={"content": f"where is my order {i}"})
                r.raise_for_status()
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker(turns // concurrency) for _ in range(concurrency)))
        return time.perf_counter() - start, latencies


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sequential", type=int, default=150)
    parser.add_argument(
        "--turns-per-session", type=int, default=20, help="turns before a new session (a call)"
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    port_file = tmp / "llm.port"
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [spawn([sys.executable, "bench/_fake_llm.py", "--port-file", str(port_file)], env)]
    try:
        while not port_file.exists() or not port_file.read_text():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        api_base = f"http://127.0.0.1:{port_file.read_text()}/v1"
        hermes_port, base_port = free_port(), free_port()
        procs.append(
            spawn(
                [
                    sys.executable,
                    "-m",
                    "app.cli",
                    "serve",
                    "--port",
                    str(hermes_port),
                    "--db",
                    str(tmp / "bench.db"),
                ],
                {
                    **env,
                    "HERMES_MODEL": "openai/bench",
                    "HERMES_MODEL_API_BASE": api_base,
                    "HERMES_MODEL_API_KEY": "sk-bench",
                    "HERMES_LOG_LEVEL": "WARNING",
                },
            )
        )
        procs.append(
            spawn(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "bench._baseline_app:app",
                    "--port",
                    str(base_port),
                    "--log-level",
                    "warning",
                ],
                {**env, "BENCH_API_BASE": api_base},
            )
        )
        hermes, baseline = f"http://127.0.0.1:{hermes_port}", f"http://127.0.0.1:{base_port}"
        await wait_ready(hermes + "/healthz")
        await wait_ready(baseline + "/docs")
        # Warm-up both (LiteLLM's first call is slow).
        await hermes_turns(hermes, 20, 2, args.turns_per_session)
        await baseline_turns(baseline, 20, 2)

        h_wall, _ = await hermes_turns(hermes, args.turns, args.concurrency, args.turns_per_session)
        b_wall, _ = await baseline_turns(baseline, args.turns, args.concurrency)
        _, h_seq = await hermes_turns(hermes, args.sequential, 1, args.turns_per_session)
        _, b_seq = await baseline_turns(baseline, args.sequential, 1)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)

    h_rate, b_rate = args.turns / h_wall, args.turns / b_wall
    ms = 1000.0
    print(
        f"turns: {args.turns} at concurrency {args.concurrency}; sequential: {args.sequential};"
        f" {args.turns_per_session} turns per session"
    )
    print(f"hermes   full turn       {h_rate:8.1f} turns/s")
    print(f"baseline litellm only    {b_rate:8.1f} turns/s")
    print(f"ratio hermes/baseline    {h_rate / b_rate:8.2f}")
    for name, seq in (("hermes", h_seq), ("base  ", b_seq)):
        p50, p95 = pct(seq, 50) * ms, pct(seq, 95) * ms
        print(f"sequential latency  {name} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms")
    print(
        f"added by hermes          p50 {(pct(h_seq, 50) - pct(b_seq, 50)) * ms:6.2f} ms"
        f"  p95 {(pct(h_seq, 95) - pct(b_seq, 95)) * ms:6.2f} ms"
        f"  (mean {(statistics.mean(h_seq) - statistics.mean(b_seq)) * ms:.2f} ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
