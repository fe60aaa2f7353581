"""How fast `hermes serve` is ready, and how much memory it holds when idle, per model path.

Spawns `python -m app.cli serve` from the current directory (so the code under test is the one
in the working directory) for three configurations:

  local    HERMES_MODEL=hermes/local (the offline default)
  direct   HERMES_MODEL=openai/test-model + HERMES_MODEL_API_BASE (an OpenAI-compatible server)
  litellm  HERMES_MODEL=anthropic/claude-3-5-haiku-latest (a provider only LiteLLM serves)

For each: the time from spawn to the first `200` from `/healthz`, and the resident set size
(VmRSS from /proc) one second after that, with nothing happening. No model is called during
start-up, so the API base points at a closed port. Runs each configuration `--runs` times,
interleaved, and prints the median and the spread.

    python bench/startup.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TARGET_READY_S = 2.0
TARGET_RSS_MB = 150.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def configurations(api_base: str) -> dict[str, dict[str, str]]:
    return {
        "local": {"HERMES_MODEL": "hermes/local"},
        "direct": {
            "HERMES_MODEL": "openai/test-model",
            "HERMES_MODEL_API_BASE": api_base,
            "HERMES_MODEL_API_KEY": "sk-bench",
        },
        "litellm": {
            "HERMES_MODEL": "anthropic/claude-3-5-haiku-latest",
            "HERMES_MODEL_API_KEY": "sk-bench",
        },
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def start_once(env: dict[str, str], tmp: Path, name: str) -> tuple[float, float]:
    """(seconds until /healthz answered 200, idle RSS in MB) of one fresh process."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    full_env = {
        **clean,
        "HERMES_DEMO_DB_PATH": str(tmp / "demo.db"),
        "HERMES_LOG_LEVEL": "WARNING",
        **env,
    }
    db = tmp / f"{name}-{port}.db"
    args = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--db", str(db)]
    url = f"http://127.0.0.1:{port}/healthz"
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with httpx.Client(timeout=5) as client:
            while True:
                if proc.poll() is not None:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"{name}: hermes serve exited: {err[-2000:]}")
                if time.perf_counter() - started > 120:
                    raise RuntimeError(f"{name}: not ready after 120 s")
                try:
                    if client.get(url).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.01)  # polling a socket from outside: there is no event to wait on
        ready = time.perf_counter() - started
        time.sleep(1.0)  # idle: let start-up's background work (MCP, sweeps) settle
        return ready, rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["local", "direct", "litellm"], action="append")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hermes-startup-"))
    from app.demo.generator import regenerate

    regenerate(tmp / "demo.db")  # once, so no run pays for generating the demo data
    configs = configurations(f"http://127.0.0.1:{free_port()}/v1")
    names = args.only or list(configs)
    ready: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.runs):
        for name in names:  # interleaved, so machine load falls on every configuration alike
            r, m = start_once(configs[name], tmp, name)
            ready[name].append(r)
            rss[name].append(m)
    print(f"hermes serve, {args.runs} runs each, cwd {Path.cwd()}; load {os.getloadavg()[0]:.2f}")
    print(f"{'model path':<10} {'ready s (median, range)':>26} {'idle RSS MB (median, range)':>30}")
    for name in names:
        print(
            f"{name:<10} {statistics.median(ready[name]):10.2f} ({spread(ready[name]):>11})"
            f" {statistics.median(rss[name]):13.1f} ({spread(rss[name]):>13})"
        )
    print(f"targets without LiteLLM: ready <= {TARGET_READY_S} s, idle RSS <= {TARGET_RSS_MB} MB")


if __name__ == "__main__":
    main()
