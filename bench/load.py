"""The articles' load profile against one Hermes process.

Starts, each in its own process: a fake OpenAI-compatible model that answers every call after
`--model-delay` seconds (300 ms) from the call's own messages (`RuleModel`: a tool call for an
order number, a parcel number or a complaint, text after the tool result, a question for the
phone number on a password reset); `hermes serve` on 127.0.0.1 with SQLite and the demo data in
a temp dir; and the load generator (bench/_load_users.py): `--users` customers, each in one
session, taking turns in a loop with think time normal(3 s, 1 s), tasks mixed 60 % order status,
20 % password reset, 15 % shipment tracking, 5 % complaint. Users start spread over `--ramp`
seconds; the figures cover the `--duration` seconds after it. Each turn is timed from its POST
to its `turn.completed` frame.

Prints per task: turns, p50/p95/p99, failures, tool errors; turns/s; the Hermes process's CPU
(cores, and its event-loop thread) and RSS (start, peak, end); the load generator's and the
fake model's CPU; and PASS/FAIL lines for the issue's targets. `--profile FILE` samples Hermes
with py-spy during the window and prints where its time went.

    python bench/load.py [--users 200] [--duration 60] [--env HERMES_X=VALUE ...]
    python bench/load.py --users 20 --duration 10 --ramp 2      # smoke (CI)

The tools run with tools.yaml's own rate limits (per tenant, sized for this load);
`--raised-tool-limits` lifts them all, to measure the runtime alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

# Run as a file, `bench` and `app` come from this checkout (not from whatever is installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._hermes import add_env_option, parse_env, start_on_rule_model
from bench._load_report import Window, report
from bench._load_users import customers
from bench._procs import ROOT, CpuMeter, memory_mb, python, spawn, stop

RAISED_RATE_LIMIT = 500.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds to start all users")
    parser.add_argument("--model-delay", type=float, default=0.3, help="seconds per model call")
    parser.add_argument("--think-mean", type=float, default=3.0)
    parser.add_argument("--think-sd", type=float, default=1.0)
    parser.add_argument("--turn-timeout", type=float, default=30.0)
    parser.add_argument("--procs", type=int, default=1, help="load generator processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--raised-tool-limits", action="store_true")
    parser.add_argument("--profile", type=Path, help="py-spy raw profile of Hermes to this file")
    add_env_option(parser)
    return parser.parse_args()


def tools_file(tmp: Path, raised: bool) -> Path:
    source = ROOT / "tools.yaml"
    if not raised:
        return source
    spec = yaml.safe_load(source.read_text())
    spec.setdefault("defaults", {})["rate_limit"] = RAISED_RATE_LIMIT
    for tool in spec["tools"]:
        tool["rate_limit"] = RAISED_RATE_LIMIT
    target = tmp / "tools.yaml"
    target.write_text(yaml.safe_dump(spec, allow_unicode=True, sort_keys=False))
    return target


async def sleep_until(epoch: float) -> None:
    await asyncio.sleep(max(0.0, epoch - time.time()))


async def main() -> None:
    args = parse_args()
    from app.demo.generator import regenerate

    tmp = Path(tempfile.mkdtemp(prefix="hermes-load-"))
    demo = tmp / "demo.db"
    regenerate(demo)
    people = customers(demo)
    extra = parse_env(args.env)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        fake, hermes = await start_on_rule_model(
            tmp,
            args.model_delay,
            extra,
            procs,
            HERMES_DEMO_DB_PATH=str(demo),
            HERMES_TOOLS_FILE=str(tools_file(tmp, args.raised_tool_limits)),
        )
        await warm_up(hermes.url, people[0])

        start_at = time.time() + 2.0  # the generators' start-up
        window = Window(start_at + args.ramp, start_at + args.ramp + args.duration)
        gens, results = [], []
        for n in range(args.procs):
            plan = tmp / f"plan{n}.json"
            plan.write_text(json.dumps(make_plan(args, hermes.url, people, start_at, n)))
            results.append(tmp / f"result{n}.json")
            gen_args = python("bench/_load_users.py", str(plan), str(results[n]))
            gens.append(spawn(gen_args, {}, tmp / f"gen{n}.log"))
        procs.extend(gens)

        rss_start = memory_mb(hermes.pid)[0]
        meters = {"hermes": CpuMeter(hermes.pid), "fake": CpuMeter(fake.pid)}
        meters.update({f"gen{i}": CpuMeter(g.pid) for i, g in enumerate(gens)})
        await sleep_until(window.start)
        for meter in meters.values():
            meter.start()
        profiler = start_profiler(args.profile, hermes.pid, args.duration)
        await sleep_until(window.end)
        for meter in meters.values():
            meter.stop()
        rss_end, rss_peak = memory_mb(hermes.pid)
        deadline = time.monotonic() + args.turn_timeout + 30
        for gen in gens:
            while gen.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        if profiler is not None:
            profiler.wait(60)
        for n, gen in enumerate(gens):
            if gen.poll() != 0:
                log = (tmp / f"gen{n}.log").read_text()[-3000:]
                raise RuntimeError(f"load generator {n} ended with {gen.returncode}:\n{log}")
        turns = [t for path in results for t in json.loads(path.read_text())["turns"]]
        model_path = hermes.model_path()
    finally:
        stop(procs)

    gen_cores = sum(m.cores for k, m in meters.items() if k.startswith("gen"))
    print(
        f"load: {args.users} users ({len(people)} demo customers), {args.duration:g} s measured"
        f" after a {args.ramp:g} s ramp-up; think normal({args.think_mean:g}, {args.think_sd:g})"
        f" s; model {args.model_delay * 1000:.0f} ms per call;"
        f" tool rate limits {'raised' if args.raised_tool_limits else 'as in tools.yaml'}"
    )
    print(f"hermes model path: {model_path}")
    report(turns, window)
    hm = meters["hermes"]
    print(
        f"hermes process    CPU {hm.cores:.2f} cores (event-loop thread {hm.main_thread_cores:.2f})"
        f"  RSS start {rss_start:.0f} MB  peak {rss_peak:.0f} MB  end {rss_end:.0f} MB"
    )
    print(f"load generator    CPU {gen_cores:.2f} cores ({args.procs} process(es))")
    print(f"fake model        CPU {meters['fake'].cores:.2f} cores")
    if args.profile is not None:
        from bench._profile import print_shares

        print_shares(args.profile)


def make_plan(
    args: argparse.Namespace, url: str, people: list[dict[str, Any]], start_at: float, n: int
) -> dict[str, Any]:
    users = [
        {"index": i, **people[i % len(people)]}
        for i in range(args.users)
        if i % args.procs == n  # users spread round-robin over the generator processes
    ]
    return {
        "base_url": url,
        "users": users,
        "users_total": args.users,
        "start_at": start_at,
        "ramp_s": args.ramp,
        "duration_s": args.duration,
        "turn_timeout_s": args.turn_timeout,
        "think_mean_s": args.think_mean,
        "think_sd_s": args.think_sd,
        "seed": args.seed,
    }


async def warm_up(url: str, person: dict[str, Any]) -> None:
    """One turn of each kind first: the first model call and first tool calls are slow."""
    import httpx

    from bench._load_users import take_turn

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        made = await client.post("/v1/sessions", json={"user_id": person["customer"]})
        session_id = made.json()["id"]
        for task, text in (
            ("order_status", f"Where is my order {person['orders'][0]}?"),
            ("shipment", f"Where is my parcel {person['parcels'][0]}?"),
            ("password_reset", "I forgot my password, can you reset it?"),
        ):
            turn = await take_turn(client, session_id, task, text, 60)
            if turn[3] is not None:
                raise RuntimeError(f"warm-up turn failed: {turn}")


def start_profiler(path: Path | None, pid: int, seconds: float) -> subprocess.Popen[bytes] | None:
    if path is None:
        return None
    spy = shutil.which("py-spy") or str(Path(python()[0]).with_name("py-spy"))
    args = [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100"]
    # Only the thread holding the GIL is sampled: py-spy's idle detection counted threads
    # waiting on a queue as busy here. --nonblocking: pausing Hermes for each sample slowed
    # its turns several-fold.
    args += ["--gil", "--nonblocking", "--threads", "--full-filenames"]
    args += ["--format", "raw", "--output", str(path)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    asyncio.run(main())
