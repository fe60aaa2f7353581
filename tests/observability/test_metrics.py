"""Metrics that move: after a few turns through HTTP (a streamed tool turn and a JSON turn, two
tenants, the fan-out through Redis), `/metrics` has samples for every family the process
declares, and every family that a turn should move has moved. Families that need something a
few turns do not do are listed with the reason."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.demo.fixtures import LI_LEI, SHIPPED_ORDER
from app.llm.prices import Prices
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.observability import metrics
from app.testing import LiveService, serve, stream_turn
from tests.redis_util import REDIS_URL, redis_prefix  # noqa: F401  # a fixture

ACME = "acme:agent:acme-key-0123456789"
GLOBEX = "globex:agent:globex-key-0123456789"

# Families that exist but that a few healthy turns on one process do not move.
STILL: dict[str, str] = {
    "hermes_steps_stuck": "needs a step running past HERMES_STEP_STUCK_AFTER_S (the watchdog)",
    "hermes_sse_streams": "a gauge of open streams: back to 0 once the turns' streams close",
    "hermes_sessions_with_worker": "a gauge of busy sessions: 0 once the turns are over",
    "hermes_db_writer_connections": "a gauge of the writer connections, fixed at start-up",
    "hermes_fanout_received": "needs a second process publishing through the same Redis",
    "hermes_fanout_polling": "a gauge, 1 only while Redis is away",
    "hermes_fanout_polling_seconds": "needs a Redis outage",
    "hermes_budget_refusals": "needs a budget or limit reached (tests/api/test_budgets.py)",
    "hermes_http_refused": "needs a request head too large or too slow (test_http_protocol.py)",
    "hermes_grounding_blocked": "needs a knowledge reply with a figure in no source (below)",
    "hermes_retention_purged_rows": "needs a retention purge (tests/storage/test_purge.py)",
    "hermes_retention_last_run_timestamp_seconds": "set by a retention purge, hourly",
    "hermes_retention_last_run_seconds": "set by a retention purge, hourly",
    "hermes_db_wal_bytes": "set by a WAL checkpoint (every HERMES_DB_CHECKPOINT_INTERVAL_S)",
}
# The handoff queue's families (its own suite drives a handoff) move only with a handoff.
NEEDS_A_HANDOFF = "hermes_handoff"


def scrape(text: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """family -> {(sample name, labels): value}."""
    families: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        families[family.name] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples
        }
    return families


def declared() -> set[str]:
    return {family.name for family in metrics.REGISTRY.collect()}


def moved(before: dict[Any, float], after: dict[Any, float]) -> bool:
    return any(
        not math.isclose(value, before.get(key, 0.0))
        for key, value in after.items()
        if not key[0].endswith(("_created", "_bucket"))
    )


def key(api_key: str) -> dict[str, str]:
    return {"X-API-Key": api_key.rsplit(":", 1)[1]}


async def session_of(svc: LiveService, api_key: str, user_id: str) -> str:
    made = await svc.client.post("/v1/sessions", json={"user_id": user_id}, headers=key(api_key))
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def test_every_declared_family_has_samples_and_a_few_turns_move_them(
    make_settings: Any,
    fake_llm: FakeLLMServer,
    redis_prefix: str,  # noqa: F811
) -> None:
    settings = make_settings(
        auth="api_key",
        api_keys=[ACME, GLOBEX],
        demo_tenants=["acme"],
        redis_url=REDIS_URL,
        redis_prefix=redis_prefix,
        metrics_max_tenants=1,
        model_prices=["openai/test-model=2/8"],
        public_paths=["healthz", "metrics"],  # Prometheus scrapes without a key
    )
    async with serve(settings) as svc:
        before = scrape((await svc.client.get("/metrics")).text)
        fake_llm.enqueue(
            ToolCalls(ToolCall("query_order_status", {"order_id": SHIPPED_ORDER})),
            Reply("Your order has shipped.", chunks=3, usage=(1000, 250)),
            Reply("Hello from globex.", usage=(500, 100)),
        )
        acme = await session_of(svc, ACME, LI_LEI)
        svc.client.headers.update(key(ACME))
        seen = await stream_turn(svc.client, acme, f"where is my order {SHIPPED_ORDER}")
        assert seen[-1].event == "turn.completed", seen[-1]
        globex = await session_of(svc, GLOBEX, "u2")
        svc.client.headers.update(key(GLOBEX))
        answered = await svc.client.post(f"/v1/sessions/{globex}/messages", json={"content": "hi"})
        assert answered.status_code == 200, answered.text
        after = scrape((await svc.client.get("/metrics")).text)
        names = declared()

    empty = sorted(n for n in names if not after.get(n))
    assert empty == [], "declared families without samples"
    still = [n for n in names if not moved(before.get(n, {}), after[n])]
    expected_still = [n for n in still if n in STILL or n.startswith(NEEDS_A_HANDOFF)]
    assert sorted(still) == sorted(expected_still), "families a turn should move did not"

    def grew(family: str, sample: str, **labels: str) -> float:
        at = (sample, tuple(sorted(labels.items())))
        return after[family].get(at, 0.0) - before.get(family, {}).get(at, 0.0)

    model = {"model": "openai/test-model"}
    assert grew("hermes_llm_call_seconds", "hermes_llm_call_seconds_count", **model,
                outcome="success") == 3  # fmt: skip
    assert grew("hermes_llm_tokens", "hermes_llm_tokens_total", **model, kind="prompt") == 1510
    assert grew("hermes_llm_tokens", "hermes_llm_tokens_total", **model, kind="completion") == 355
    # (1510 * 2 + 355 * 8) / 1e6 US dollars
    assert grew("hermes_llm_cost_usd", "hermes_llm_cost_usd_total", **model) == pytest.approx(
        5.86e-3
    )
    # One tenant gets its own label; the next shares `other`.
    assert grew("hermes_tenant_turns", "hermes_tenant_turns_total", tenant="acme",
                status="completed") == 1  # fmt: skip
    assert grew("hermes_tenant_turns", "hermes_tenant_turns_total", tenant="other",
                status="completed") == 1  # fmt: skip
    assert grew("hermes_turn_first_delta_seconds", "hermes_turn_first_delta_seconds_count") == 2
    assert grew("hermes_db_commits", "hermes_db_commits_total") >= 2


async def test_a_model_without_a_configured_price_is_costed_from_the_price_map(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    # No HERMES_MODEL_PRICES: the metric prices the call as the cost budgets do, from LiteLLM's
    # bundled map (the one price per answered call, app/llm/prices.py).
    model = "openai/gpt-4o-mini"
    price = await Prices().of(model)
    assert price.input > 0 and price.output > 0  # the map knows it
    async with serve(make_settings(model=model, public_paths=["healthz", "metrics"])) as svc:
        before = scrape((await svc.client.get("/metrics")).text)
        fake_llm.enqueue(Reply("Hello.", usage=(1000, 200)))
        session = await svc.client.post("/v1/sessions", json={"user_id": "u1"})
        answered = await svc.client.post(
            f"/v1/sessions/{session.json()['id']}/messages", json={"content": "hi"}
        )
        assert answered.status_code == 200, answered.text
        after = scrape((await svc.client.get("/metrics")).text)
    at = ("hermes_llm_cost_usd_total", (("model", model),))
    cost = after["hermes_llm_cost_usd"][at] - before.get("hermes_llm_cost_usd", {}).get(at, 0.0)
    assert cost == pytest.approx(price.of(1000, 200))


async def test_grounding_blocks_are_counted_by_outcome_from_zero(make_settings: Any) -> None:
    # The turn counts a reply the grounding check held back: asked again, or answered with the
    # passage's own words and the offer of a human. Both series are there before the first.
    family = "hermes_grounding_blocked"
    async with serve(make_settings(public_paths=["healthz", "metrics"])) as svc:
        before = scrape((await svc.client.get("/metrics")).text)[family]
        metrics.GROUNDING_BLOCKED.labels(outcome="retried").inc()
        metrics.GROUNDING_BLOCKED.labels(outcome="fallback").inc()
        metrics.GROUNDING_BLOCKED.labels(outcome="fallback").inc()
        after = scrape((await svc.client.get("/metrics")).text)[family]

    def at(outcome: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return (f"{family}_total", (("outcome", outcome),))

    assert {at(outcome) for outcome in metrics.GROUNDING_OUTCOMES} <= set(before)
    assert after[at("retried")] - before[at("retried")] == 1
    assert after[at("fallback")] - before[at("fallback")] == 2
