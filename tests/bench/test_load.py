"""bench/load.py in its smoke size against the real service: it runs every task of the profile
end to end (fake model, `hermes serve`, load generator, each its own process) and prints the
figures the issue asks for. No timing is asserted: the figures are for people to read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("order_status", "password_reset", "shipment", "complaint", "all")


def test_the_smoke_profile_runs_every_task_without_failures() -> None:
    args = ["bench/load.py", "--users", "20", "--duration", "10", "--ramp", "2", "--seed", "7"]
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    rows = {
        line.split()[0]: line.split() for line in lines if line.split()[:1] in ([t] for t in TASKS)
    }
    assert set(rows) == set(TASKS), done.stdout
    for task, (_, turns, _p50, _p95, _p99, failures, tool_errors) in rows.items():
        assert int(turns) > 0 and failures == "0" and tool_errors == "0", (task, done.stdout)
    assert "PASS  failures 0 (target 0)" in lines
    assert any(line.endswith("(target <= 500)") for line in lines), done.stdout
    assert any(line.endswith("(target <= 1000)") for line in lines), done.stdout
    for start in ("hermes model path: HERMES_MODEL=openai/bench", "throughput ",
                  "hermes process    CPU ", "load generator    CPU "):  # fmt: skip
        assert any(line.startswith(start) for line in lines), (start, done.stdout)
    assert "RSS start " in done.stdout and " peak " in done.stdout
