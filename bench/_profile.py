"""Where a Hermes process spends its CPU, from a py-spy raw profile (`--format raw --threads
--full-filenames`).

    python -m bench._profile FILE

Each sampled stack is put in one bucket: anything under LiteLLM or Hermes' LiteLLM adapter
(the openai SDK, httpx and pydantic they call included) is the LiteLLM path's; then the openai
SDK or httpx called by Hermes directly; otherwise the deepest Hermes frame decides (storage,
NLU, memory, tools, events, ...); SQLite reader threads are storage; the rest of the event-loop
thread is the HTTP server and the loop itself. Shares are of the samples (taken with `--gil`:
only the thread holding the GIL, i.e. Python running), for all threads and for the event-loop
(main) thread alone.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

_LIBRARIES = (
    # LiteLLM itself and Hermes' LiteLLM adapter (which iterates the SDK stream LiteLLM made).
    ("LiteLLM path (and the SDK/httpx under it)", ("(litellm/", "litellm_gateway.py")),
    ("openai SDK", ("(openai/",)),
    ("httpx/httpcore", ("(httpx/", "(httpcore/")),
)
# The deepest Hermes frame's module decides; first matching prefix wins.
_HERMES = (
    ("events and SSE", ("app/conversation/events", "app/conversation/emitter", "app/api/sse")),
    ("storage (SQLite)", ("app/storage/",)),
    ("NLU", ("app/nlu/",)),
    ("memory", ("app/memory/",)),
    ("tools (and demo backend)", ("app/tools/", "app/demo/")),
    ("model chain (app/llm)", ("app/llm/",)),
    ("steps (app/workflow)", ("app/workflow/",)),
    ("turn loop and context", ("app/conversation/",)),
    ("API routes and middleware", ("app/api/",)),
    ("other Hermes code", ("app/",)),
)
# The process's entry point is under every stack; it says nothing about where time goes.
_ENTRY = ("app/cli.py", "app/__main__.py")
# Where a full file name's package part starts (py-spy --full-filenames).
_ROOTS = ("/site-packages/", "/lib/python3.11/", "/lib/python3.12/", "/lib/python3.13/")


def short(frame: str) -> str:
    """`func (/abs/path/pkg/mod.py:12)` as `func (pkg/mod.py:12)`; Hermes files as `app/...`."""
    func, sep, path = frame.rpartition(" (")
    if not sep:
        return frame
    for root in _ROOTS:
        if root in path:
            return f"{func} ({path.rpartition(root)[2]}"
    if "/app/" in path:
        return f"{func} (app/{path.rpartition('/app/')[2]}"
    return frame


def bucket(frames: list[str], main_thread: bool = False) -> str:
    frames = [short(f) for f in frames]
    for name, marks in _LIBRARIES:
        if any(mark in frame for frame in frames for mark in marks):
            return name
    for frame in reversed(frames):
        path = frame.rpartition("(")[2]
        if path.startswith("app/") and not path.startswith(_ENTRY):
            return next(name for name, prefixes in _HERMES if path.startswith(prefixes))
    if any("(aiosqlite/" in frame or "(sqlite3/" in frame for frame in frames):
        return "storage (SQLite)"
    if main_thread:
        return "HTTP server and event loop (uvicorn, uvloop)"
    return "other threads"


def shares(path: Path) -> tuple[Counter[str], Counter[str]]:
    """Samples per bucket: (all threads, main thread)."""
    every: Counter[str] = Counter()
    main: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        in_main = frames[0].endswith(": MainThread")
        name = bucket(frames[1:], in_main)
        every[name] += int(count)
        if in_main:
            main[name] += int(count)
    return every, main


def print_shares(path: Path) -> None:
    every, main = shares(path)
    total, main_total = sum(every.values()) or 1, sum(main.values()) or 1
    print(f"profile of the Hermes process (py-spy, {path}): share of busy samples")
    print(f"  {'':<46}{'all threads':>12}{'event loop':>12}")
    for name, n in every.most_common():
        print(f"  {name:<46}{100 * n / total:>11.1f}%{100 * main[name] / main_total:>11.1f}%")
    print(f"  samples: {sum(every.values())} (event-loop thread {sum(main.values())})")


if __name__ == "__main__":
    print_shares(Path(sys.argv[1]))
