"""What a Hermes turn costs on top of the model call itself.

Runs, in one go and on the same machine, each in its own process: a fake OpenAI-compatible
model server that answers instantly; Hermes (`hermes serve`, SQLite WAL, full turn: session,
messages, events, steps, snapshot); and two bare FastAPI endpoints that store nothing and make
one streamed model call, one through `litellm.acompletion`, one through the `openai` SDK's
`AsyncOpenAI`. Prints turns/s of each at a fixed concurrency, for Hermes in sessions of each
`--session-turns` length; the ratios Hermes/LiteLLM and Hermes/openai-SDK; sequential p50/p95
and what Hermes adds; Hermes' start-up time, idle RSS and the model path it took; and PASS/FAIL
lines for the targets of issue 10.

    python bench/turn_overhead.py [--turns 320] [--concurrency 8] [--session-turns 20,150]
        [--rounds 1] [--env HERMES_MODEL_API=openai ...]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

# Run as a file, `bench` and `app` come from this checkout (not from whatever is installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._hermes import add_env_option, parse_env, start_hermes
from bench._procs import free_port, pct, python, spawn, stop, wait_port_file, wait_ready

# Targets of issue 10 (printed, not asserted).
RATIO_TARGET = 1.2  # Hermes / bare LiteLLM endpoint, 20-turn sessions
LONG_SESSION_TARGET = 0.9  # 150-turn sessions' throughput / 20-turn sessions'
READY_TARGET_S = 2.0
IDLE_RSS_TARGET_MB = 150.0


@dataclass
class Run:
    rate: float  # turns/s at the concurrency
    seq: list[float]  # sequential latencies, seconds


def median_run(runs: list[Run]) -> Run:
    """The median throughput of the rounds, and every round's sequential latencies."""
    return Run(statistics.median(r.rate for r in runs), [t for r in runs for t in r.seq])


async def hermes_turns(
    base: str, turns_per_worker: int, concurrency: int, per_session: int
) -> tuple[float, list[float]]:
    """Each worker talks in sessions of `per_session` turns (a call), then opens a new one."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        latencies: list[float] = []

        async def worker(who: int) -> None:
            session_id = ""
            for i in range(turns_per_worker):
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
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return time.perf_counter() - start, latencies


async def baseline_turns(
    base: str, turns_per_worker: int, concurrency: int
) -> tuple[float, list[float]]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        latencies: list[float] = []

        async def worker() -> None:
            for i in range(turns_per_worker):
                t = time.perf_counter()
                r = await client.post("/turn", json={"content": f"where is my order {i}"})
                r.raise_for_status()
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start, latencies


async def measure_hermes(base: str, args: argparse.Namespace, per_session: int) -> Run:
    # Whole sessions only, and at least one per worker: a 150-turn figure must come from
    # turns deep into 150-turn sessions.
    sessions = math.ceil(max(args.turns / args.concurrency, per_session) / per_session)
    per_worker = sessions * per_session
    wall, _ = await hermes_turns(base, per_worker, args.concurrency, per_session)
    _, seq = await hermes_turns(base, args.sequential, 1, per_session)
    return Run(per_worker * args.concurrency / wall, seq)


async def measure_baseline(base: str, args: argparse.Namespace) -> Run:
    per_worker = math.ceil(args.turns / args.concurrency)
    wall, _ = await baseline_turns(base, per_worker, args.concurrency)
    _, seq = await baseline_turns(base, args.sequential, 1)
    return Run(per_worker * args.concurrency / wall, seq)


async def start_baseline(factory: str, api_base: str, procs: list[subprocess.Popen[bytes]]) -> str:
    port = free_port()
    args = ["-m", "uvicorn", "--factory", f"bench._baseline_app:{factory}"]
    args += ["--port", str(port), "--log-level", "warning"]
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "BENCH_API_BASE": api_base}
    proc = spawn(python(*args), env)
    procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    await wait_ready(url + "/docs", proc)
    await baseline_turns(url, 10, 2)  # warm-up: LiteLLM's first call is slow
    return url


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=320, help="turns per concurrent run")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sequential", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=1, help="repeat all runs; median turns/s")
    parser.add_argument(
        "--session-turns",
        default="20,150",
        help="comma-separated session lengths for Hermes (turns before a new session)",
    )
    add_env_option(parser)
    return parser.parse_args()


async def main() -> None:
    args = parse_args()
    lengths = [int(n) for n in args.session_turns.split(",") if n.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    port_file = tmp / "llm.port"
    procs = [spawn(python("bench/_fake_llm.py", "--port-file", str(port_file)), {})]
    try:
        api_base = f"http://127.0.0.1:{await wait_port_file(port_file, procs[0])}/v1"
        hermes = await start_hermes(tmp, api_base, parse_env(args.env))
        procs.append(hermes.proc)
        lite = await start_baseline("litellm_app", api_base, procs)
        sdk = await start_baseline("openai_app", api_base, procs)
        await hermes_turns(hermes.url, 10, 2, 20)  # warm-up

        # Interleaved, and repeated in rounds, so that a burst of load from elsewhere on the
        # shared machine hits one figure of each kind rather than all figures of one.
        rounds: dict[str, list[Run]] = {}
        for _ in range(args.rounds):
            for n, length in enumerate(lengths):
                name = f"hermes, {length}-turn sessions"
                rounds.setdefault(name, []).append(await measure_hermes(hermes.url, args, length))
                if n == 0:
                    for name, url in (
                        ("bare LiteLLM endpoint", lite),
                        ("bare openai-SDK endpoint", sdk),
                    ):
                        rounds.setdefault(name, []).append(await measure_baseline(url, args))
        model_path = hermes.model_path()
    finally:
        stop(procs)
    runs = {name: median_run(of) for name, of in rounds.items()}
    report(args, lengths, runs, hermes.ready_s, hermes.idle_rss_mb, model_path)


def report(
    args: argparse.Namespace,
    lengths: list[int],
    runs: dict[str, Run],
    ready_s: float,
    idle_rss_mb: float,
    model_path: str,
) -> None:
    ms = 1000.0
    print(f"hermes model path: {model_path}")
    print(
        f"concurrency {args.concurrency}, >= {args.turns} turns per run;"
        f" sequential {args.sequential} turns; instant fake model;"
        f" {args.rounds} round(s), median turns/s"
    )
    print(f"{'':<30}{'turns/s':>9}{'seq p50 ms':>12}{'seq p95 ms':>12}")
    for name, run in runs.items():
        p50, p95 = pct(run.seq, 50) * ms, pct(run.seq, 95) * ms
        print(f"{name:<30}{run.rate:>9.1f}{p50:>12.2f}{p95:>12.2f}")
    lite, sdk = runs["bare LiteLLM endpoint"], runs["bare openai-SDK endpoint"]
    for length in lengths:
        mine = runs[f"hermes, {length}-turn sessions"]
        print(
            f"{length}-turn sessions: ratio hermes/LiteLLM {mine.rate / lite.rate:.2f},"
            f" hermes/openai-SDK {mine.rate / sdk.rate:.2f}"
        )
        for name, base in (("LiteLLM", lite), ("openai-SDK", sdk)):
            p50 = (pct(mine.seq, 50) - pct(base.seq, 50)) * ms
            p95 = (pct(mine.seq, 95) - pct(base.seq, 95)) * ms
            print(
                f"  added by hermes over the {name} endpoint: p50 {p50:+.2f} ms  p95 {p95:+.2f} ms"
            )
    print(f"hermes start-up: ready after {ready_s:.1f} s, idle RSS {idle_rss_mb:.0f} MB")
    first = runs[f"hermes, {lengths[0]}-turn sessions"]
    if lengths[0] == 20:
        ratio = first.rate / lite.rate
        _target(ratio >= RATIO_TARGET, f"hermes/LiteLLM, 20-turn sessions {ratio:.3f}", ">= 1.2")
    if len(lengths) > 1:  # the target: 150-turn sessions against 20-turn ones
        last = lengths[-1]
        long = runs[f"hermes, {last}-turn sessions"].rate / first.rate
        _target(
            long >= LONG_SESSION_TARGET,
            f"{last}-turn sessions at {long:.3f} of the {lengths[0]}-turn throughput",
            f">= {LONG_SESSION_TARGET}",
        )
    _target(ready_s <= READY_TARGET_S, f"hermes ready after {ready_s:.1f} s", "<= 2 s")
    _target(idle_rss_mb <= IDLE_RSS_TARGET_MB, f"idle RSS {idle_rss_mb:.0f} MB", "<= 150 MB")


def _target(ok: bool, what: str, target: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {what} (target {target})")


if __name__ == "__main__":
    asyncio.run(main())
