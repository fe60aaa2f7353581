"""The profile summary puts each py-spy stack where its time belongs."""

from __future__ import annotations

from pathlib import Path

from bench._profile import shares

SP = "/venv/lib/python3.11/site-packages"
LIB = "/usr/lib/python3.11"
MAIN = "thread (1): MainThread;<module> (/src/app/cli.py:74);run (" + SP + "/uvicorn/main.py:632)"
RAW = f"""\
{MAIN};TurnPipeline.run (/src/app/conversation/turn/pipeline.py:63);Tx.execute (/src/app/storage/tx.py:30) 3
{MAIN};LiteLLMModel.stream (/src/app/llm/litellm_gateway.py:81);AsyncStream.__aiter__ ({SP}/openai/_streaming.py:167) 5
{MAIN};Runner.run ({LIB}/asyncio/runners.py:118) 2
thread (2): uvloop_1;_worker ({LIB}/concurrent/futures/thread.py:83);completion ({SP}/litellm/main.py:5979) 4
thread (3): Thread-1;_connection_worker_thread ({SP}/aiosqlite/core.py:59) 1
{MAIN};Emitter.emit (/src/app/conversation/emitter.py:40);dumps ({LIB}/json/__init__.py:231) 1
"""  # noqa: E501


def test_stacks_land_in_their_buckets(tmp_path: Path) -> None:
    path = tmp_path / "profile.raw"
    path.write_text(RAW)
    every, main = shares(path)
    assert every == {
        "LiteLLM path (and the SDK/httpx under it)": 9,  # the adapter's stream and a worker thread
        "storage (SQLite)": 4,  # Hermes' storage and a SQLite reader thread
        "HTTP server and event loop (uvicorn, uvloop)": 2,
        "events and SSE": 1,
    }
    assert main["LiteLLM path (and the SDK/httpx under it)"] == 5 and main["storage (SQLite)"] == 3
