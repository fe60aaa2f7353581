"""Runtime wiring details that no route shows on its own."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.runtime import REDIS_DEGRADED, SharedHttpClient, health_status
from app.settings import PROJECT_ROOT
from app.storage.session_writer import NO_SESSION
from app.testing import serve
from tests.conftest import FIXTURE_TOOLS, new_session
from tests.tools import test_deps


def test_start_up_is_steps_no_longer_than_60_lines() -> None:
    """`open_runtime` composes start-up steps; none of them (nor anything else in
    app/runtime/) grows back into one long function."""
    long = [
        f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted((PROJECT_ROOT / "app" / "runtime").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or 0) - node.lineno + 1 > 60
    ]
    assert long == []


async def test_http_tools_client_is_made_on_first_use_and_shared() -> None:
    shared = SharedHttpClient(timeout_s=3.0)
    assert shared._client is None  # nothing built at start-up

    first = shared()
    assert shared() is first
    assert first.timeout.read == 3.0

    await shared.aclose()
    assert first.is_closed
    assert shared() is not first  # a later use after close gets a fresh client
    await shared.aclose()


async def test_closing_an_unused_client_is_a_no_op() -> None:
    shared = SharedHttpClient()
    await shared.aclose()
    assert shared._client is None


def test_only_a_failing_required_dependency_makes_the_process_failing() -> None:
    assert health_status({"database": "ok"}) == "ok"
    assert health_status({"database": "ok", "redis": "ok"}) == "ok"
    assert health_status({"database": "ok", "redis": REDIS_DEGRADED}) == "degraded"
    assert health_status({"database": "error: OperationalError"}) == "failing"
    assert health_status({"database": "error: OperationalError", "redis": REDIS_DEGRADED}) == (
        "failing"
    )


async def test_the_service_purges_on_its_interval_and_says_so_in_its_metrics(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    settings = make_settings(retention_interval_s=0.1, db_checkpoint_interval_s=0.1)
    async with serve(settings) as svc:
        fake_llm.enqueue(Reply("Hello."), Reply("Hello again."))
        old, live = await new_session(svc), await new_session(svc)
        for session_id in (old, live):
            answered = await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "hi"}
            )
            assert answered.status_code == 200, answered.text
        long_ago = time.time() - 40 * 86400
        await svc.runtime.db.write(
            NO_SESSION,
            lambda conn: conn.execute(
                "UPDATE sessions SET status = 'archived', archived_at = ? WHERE id = ?",
                (long_ago, old),
            ),
        )
        passes = svc.runtime.purger.passes
        async with asyncio.timeout(10):
            while True:
                report = await svc.runtime.purger.wait_for_passes(passes + 1)
                passes += 1
                if report is not None and report.rows:
                    break
        scraped = (await svc.client.get("/metrics")).text
        replay = await svc.runtime.db.fetchall(
            "SELECT s.id, count(*) FROM events e JOIN sessions s"
            " ON s.session_key = e.session_key GROUP BY s.id"
        )

    assert {r[0] for r in replay} == {live}
    purged = re.search(r'hermes_retention_purged_rows_total\{table="events"\} (\S+)', scraped)
    assert purged is not None and float(purged[1]) >= 4
    last = re.search(r"^hermes_retention_last_run_timestamp_seconds (\S+)", scraped, re.M)
    assert last is not None and float(last[1]) > long_ago


async def test_a_tools_file_without_demo_tools_never_creates_the_demo_file(
    make_settings: Any, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    demo = tmp_path / "fresh" / "demo.db"
    async with serve(make_settings(tools_file=FIXTURE_TOOLS, demo_db_path=demo)) as svc:
        fake_llm.enqueue(Reply("Hello."))
        session_id = await new_session(svc)
        answered = await svc.client.post(
            f"/v1/sessions/{session_id}/messages", json={"content": "hi"}
        )
        assert answered.status_code == 200, answered.text
    assert not demo.exists()


async def test_the_demo_tools_open_the_demo_file_at_start_up(
    make_settings: Any, tmp_path: Path
) -> None:
    demo = tmp_path / "fresh" / "demo.db"
    async with serve(make_settings(tools_file=PROJECT_ROOT / "tools.yaml", demo_db_path=demo)):
        assert demo.exists()  # made on first use, as the quick start expects


async def test_a_deployments_own_backend_serves_its_tool_in_a_turn(
    make_settings: Any, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("version: 1\n" + test_deps.PROVIDERS + "tools:" + test_deps.TOOL)
    demo = tmp_path / "fresh" / "demo.db"
    test_deps.OPENED.clear()
    async with serve(make_settings(tools_file=tools, demo_db_path=demo)) as svc:
        assert test_deps.OPENED == ["crm"]  # and not the warehouse: no tool needs it
        fake_llm.enqueue(ToolCalls(ToolCall("customer_tier", {}, id="c1")), Reply("Gold."))
        session_id = await new_session(svc, user_id="u1")
        body = (
            await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "my tier?"}
            )
        ).json()
        assert body["message"]["content"] == "Gold."
        result = json.loads(fake_llm.requests[1].messages[-1]["content"])
        assert result["data"] == {"tier": "gold"}
    assert test_deps.OPENED == ["crm", "crm closed"]
    assert not demo.exists()
