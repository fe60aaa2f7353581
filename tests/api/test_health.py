"""`/healthz` with Redis configured: Redis going away degrades the process (200, `degraded`,
`checks.redis` says how it copes) instead of taking it out of the load balancer, and it is
`ok` again when Redis is back."""

from __future__ import annotations

import asyncio
from typing import Any

from app.llm.testing import FakeLLMServer
from app.runtime import REDIS_DEGRADED
from app.testing import LiveService, serve
from tests.conftest import new_session
from tests.redis_util import proxied_redis, redis_prefix  # noqa: F401 (a fixture)


async def health_until(svc: LiveService, redis: str) -> dict[str, Any]:
    """The first /healthz answer (200) whose `checks.redis` is `redis`."""
    async with asyncio.timeout(15):
        while True:
            response = await svc.client.get("/healthz")
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            if body["checks"]["redis"] == redis:
                return body
            await asyncio.sleep(0.05)


async def test_redis_cut_degrades_health_without_failing_it_and_ok_when_back(
    make_settings: Any,
    redis_prefix: str,  # noqa: F811
    fake_llm: FakeLLMServer,
) -> None:
    async with proxied_redis() as (proxy, url):
        async with serve(make_settings(redis_url=url, redis_prefix=redis_prefix)) as svc:
            body = await health_until(svc, "ok")
            assert body["status"] == "ok" and body["checks"]["database"] == "ok"

            await proxy.cut()
            body = await health_until(svc, REDIS_DEGRADED)
            assert body["status"] == "degraded" and body["checks"]["database"] == "ok"
            # Degraded, not down: turns still run.
            session_id = await new_session(svc)
            answer = await svc.client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": "still there?"}
            )
            assert answer.status_code == 200, answer.text

            await proxy.restore()
            body = await health_until(svc, "ok")
            assert body["status"] == "ok"


async def test_without_redis_health_has_no_redis_check(service: LiveService) -> None:
    body = (await service.client.get("/healthz")).json()
    assert body["checks"] == {"database": "ok"} and body["status"] == "ok"
