"""Runtime wiring details that no route shows on its own."""

from __future__ import annotations

from app.runtime import REDIS_DEGRADED, SharedHttpClient, health_status


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
