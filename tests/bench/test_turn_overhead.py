"""bench/turn_overhead.py at a tiny size: Hermes and both bare endpoints (LiteLLM, openai SDK)
answer, and the bench prints each figure and target line. No timing is asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_it_compares_hermes_with_both_bare_endpoints() -> None:
    args = ["bench/turn_overhead.py", "--turns", "16", "--concurrency", "2", "--sequential", "4"]
    args += ["--session-turns", "20,30", "--env", "HERMES_MODEL=openai/other"]
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("hermes, 20-turn sessions", "hermes, 30-turn sessions",
                 "bare LiteLLM endpoint", "bare openai-SDK endpoint"):  # fmt: skip
        assert re.search(rf"^{name} +\d+\.\d +\d+\.\d\d +\d+\.\d\d$", out, re.M), (name, out)
    assert re.search(
        r"^20-turn sessions: ratio hermes/LiteLLM \d+\.\d\d, hermes/openai-SDK", out, re.M
    )
    assert "added by hermes over the openai-SDK endpoint: p50 " in out
    assert re.search(
        r"^(PASS|FAIL)  hermes/LiteLLM, 20-turn sessions .*\(target >= 1\.2\)$", out, re.M
    )
    assert re.search(r"^(PASS|FAIL)  30-turn sessions at .* of the 20-turn throughput", out, re.M)
    assert re.search(r"^(PASS|FAIL)  idle RSS \d+ MB", out, re.M)
    # The --env setting reached the Hermes process (its turns went through), and the path line
    # says what the process runs on.
    assert re.search(
        r"^hermes model path: HERMES_MODEL=openai/other .*in the Hermes process\)$", out, re.M
    )
