"""Processes for the benchmarks: start them, wait for them, and read their CPU and memory from
/proc (Linux), so a figure is the process's own and not the machine's."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")
# A native library only LiteLLM loads: in a process's memory map iff LiteLLM was imported.
_LITELLM_MARK = "/litellm/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], env: dict[str, str], log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start `args` from the project root with `env` over this process's environment, less
    any HERMES_* variable of the caller's shell (the bench decides what Hermes runs with)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    out = log.open("ab") if log is not None else None
    try:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env={**base, **env},
            stdout=subprocess.DEVNULL,
            stderr=out if out is not None else subprocess.DEVNULL,
        )
    finally:
        if out is not None:
            out.close()  # the child keeps its own copy


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def stop(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 90) -> float:
    """Seconds until `url` answers 200; fails early if the process exits."""
    start = time.monotonic()
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() - start < timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
            try:
                if (await client.get(url)).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up within {timeout_s:.0f}s")


async def wait_port_file(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while (port := _read_port(path)) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args} did not write {path}")
        await asyncio.sleep(0.05)
    return port


def _read_port(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() else None


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# -- /proc ------------------------------------------------------------------------------------


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU time of a process (or one of its threads) so far."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    with open(path) as f:
        # The command name may hold spaces; the fields after its closing parenthesis don't.
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def children(pid: int) -> list[int]:
    """The process's live child processes (e.g. uvicorn's workers)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its live children (a child that ended is not counted)."""
    total = 0.0
    for one in (pid, *children(pid)):
        try:
            total += cpu_seconds(one)
        except FileNotFoundError:
            continue
    return total


def memory_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) in MiB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def litellm_loaded(pid: int) -> bool:
    """Whether LiteLLM is imported in the process (its native module is mapped)."""
    with open(f"/proc/{pid}/maps") as f:
        return any(_LITELLM_MARK in line for line in f)


@dataclass
class CpuMeter:
    """CPU cores a process (and its main thread) used between `start()` and `stop()`;
    `children=True` adds its child processes (worker processes started before `start()`)."""

    pid: int
    children: bool = False
    _wall: float = 0.0
    _cpu: float = 0.0
    _main: float = 0.0
    cores: float = 0.0
    main_thread_cores: float = 0.0

    def start(self) -> None:
        self._wall = time.monotonic()
        self._cpu, self._main = self._total(), cpu_seconds(self.pid, self.pid)

    def stop(self) -> None:
        wall = time.monotonic() - self._wall
        self.cores = (self._total() - self._cpu) / wall
        self.main_thread_cores = (cpu_seconds(self.pid, self.pid) - self._main) / wall

    def _total(self) -> float:
        return tree_cpu_seconds(self.pid) if self.children else cpu_seconds(self.pid)


def pids_named(*names: str) -> list[int]:
    """Live processes whose command name is one of `names` (e.g. the PostgreSQL server's)."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                name = f.read().partition("(")[2].rpartition(")")[0]
        except OSError:
            continue
        if name in names:
            found.append(int(entry))
    return found


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle so far (from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / _TICKS


class GroupCpuMeter:
    """CPU cores a group of processes used between `start()` and `stop()`: the processes are
    named as functions, so ones that start later (a server's backends) are counted too; a
    process that ended in between is missed, which only ever under-counts."""

    def __init__(self, find: Callable[[], list[int]]) -> None:
        self._find = find
        self._before: dict[int, float] = {}
        self._wall = 0.0
        self.cores = 0.0

    def _now(self) -> dict[int, float]:
        seen: dict[int, float] = {}
        for pid in self._find():
            try:
                seen[pid] = cpu_seconds(pid)
            except OSError:
                continue
        return seen

    def start(self) -> None:
        self._wall, self._before = time.monotonic(), self._now()

    def stop(self) -> None:
        wall = time.monotonic() - self._wall
        used = sum(cpu - self._before.get(pid, 0.0) for pid, cpu in self._now().items())
        self.cores = used / wall
