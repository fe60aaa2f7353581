"""A deployment plugs its own backend into its tools, with no demo: a handler names it by type
(`ToolContext[Crm]`), tools.yaml lists its provider once, the loader refuses a tool whose
dependency nothing provides, only what a tool needs is opened, and the real executor hands
each call (its precheck too) the dependency as opened."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from app.errors import ConfigError, ToolHandlerError, ToolsFileError
from app.llm.gateway import RequestedToolCall
from app.settings import Settings
from app.storage.session_writer import SessionWriter
from app.tools.context import ToolContext, TurnScope
from app.tools.deps import Dependencies, Provider, dependency_of, open_dependencies
from app.tools.handlers import build_runner
from app.tools.loader import ToolsFile, load_tools_file, resolve_python
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.tools.executors import executor_on

if TYPE_CHECKING:

    class Later:  # a type only the type checker sees
        pass

# -- the deployment's own backend: a fake CRM, and something no tool needs -------------------

OPENED: list[str] = []


class Crm:
    def __init__(self, tiers: dict[str, str]) -> None:
        self.tiers = tiers
        self.asked: list[tuple[str, str]] = []

    async def tier(self, tenant_id: str, user_id: str) -> str | None:
        self.asked.append((tenant_id, user_id))
        return self.tiers.get(user_id)


@contextlib.asynccontextmanager
async def open_crm(settings: Settings) -> AsyncIterator[Crm]:
    OPENED.append("crm")
    try:
        yield Crm({"u1": "gold"})
    finally:
        OPENED.append("crm closed")


class Warehouse:
    pass


@contextlib.asynccontextmanager
async def open_warehouse(settings: Settings) -> AsyncIterator[Warehouse]:
    OPENED.append("warehouse")
    yield Warehouse()


CRM = Provider(Crm, open_crm)
WAREHOUSE = Provider(Warehouse, open_warehouse)
NOT_A_PROVIDER = object()


async def customer_tier(ctx: ToolContext[Crm]) -> dict[str, Any]:
    return {"tier": await ctx.deps.tier(ctx.tenant_id, ctx.user_id)}


async def known_customer(ctx: ToolContext[Crm]) -> None:
    if await ctx.deps.tier(ctx.tenant_id, ctx.user_id) is None:
        raise ToolHandlerError("customer_unknown", "the CRM does not know this customer")


async def stock_check(ctx: ToolContext[Warehouse]) -> None:
    return None


async def typed_later(ctx: ToolContext[Later]) -> None:
    return None


def no_annotation(ctx, x):
    return None


TOOL = """
  - name: customer_tier
    description: The customer's loyalty tier from the CRM; read-only, no side effects.
    risk: read
    parameters: {type: object, additionalProperties: false, properties: {}}
    precheck: tests.tools.test_deps:known_customer
    handler: {python: "tests.tools.test_deps:customer_tier"}
  - name: get_current_time
    description: The current time; read-only, here to show it needs nothing.
    risk: read
    parameters: {type: object, additionalProperties: false, properties: {}}
    handler: {python: "app.tools.builtin.clock:current_time"}
"""
PROVIDERS = """providers:
  - tests.tools.test_deps:CRM
  - tests.tools.test_deps:WAREHOUSE
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def load(tmp_path: Path, body: str) -> ToolsFile:
    return load_tools_file(write(tmp_path, body), resolve=resolve_python)


def registry_of(tools: ToolsFile) -> ToolRegistry:
    registry = ToolRegistry()
    for spec in tools.tools:
        registry.register(spec, build_runner(spec, http_client=_no_http))
    return registry


def _no_http() -> httpx.AsyncClient:
    raise AssertionError("these tools make no HTTP calls")


class Events:
    async def started(self, call: RequestedToolCall) -> None:
        return None

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        return None


def scope(user_id: str) -> TurnScope:
    return TurnScope("default", user_id, "ses_1", "turn_1", writer=SessionWriter("ses_1"))


async def test_a_deployments_own_backend_reaches_its_tool_through_the_executor(
    tmp_path: Path, open_db: Any
) -> None:
    OPENED.clear()
    tools = load(tmp_path, "version: 1\n" + PROVIDERS + "tools:" + TOOL)
    needs = {spec.name: spec.dependency for spec in tools.tools}
    assert needs == {"customer_tier": Crm, "get_current_time": None}
    assert tools.needed() == [CRM]  # the warehouse is provided, but no tool needs it

    async with open_dependencies(tools.needed(), Settings(db_path=tmp_path / "h.db")) as deps:
        assert OPENED == ["crm"]
        executor = executor_on(await open_db(), registry_of(tools), deps=deps)
        call = RequestedToolCall("c1", "customer_tier", "{}")
        [known] = await executor.run_calls([call], scope("u1"), Events())
        [unknown] = await executor.run_calls([call], scope("u2"), Events())
        [clock] = await executor.run_calls(
            [RequestedToolCall("c2", "get_current_time", "{}")], scope("u1"), Events()
        )
    assert OPENED == ["crm", "crm closed"]

    assert known.status == "success" and known.data == {"tier": "gold"}
    # The precheck took the same context: the CRM answered it before the handler ran.
    assert unknown.status == "error" and unknown.error is not None
    assert unknown.error.code == "customer_unknown"
    assert clock.status == "success"


async def test_a_tools_file_that_needs_nothing_opens_nothing(tmp_path: Path, open_db: Any) -> None:
    OPENED.clear()
    clock_only = TOOL[TOOL.index("  - name: get_current_time") :]
    tools = load(tmp_path, "version: 1\n" + PROVIDERS + "tools:\n" + clock_only)
    assert tools.needed() == []
    async with open_dependencies(tools.needed(), Settings(db_path=tmp_path / "h.db")) as deps:
        executor_on(await open_db(), registry_of(tools), deps=deps)
    assert OPENED == []


def _line(body: str, marker: str) -> int:
    return next(i for i, text in enumerate(body.splitlines(), 1) if marker in text)


def test_a_tool_whose_dependency_nothing_provides_stops_the_load(tmp_path: Path) -> None:
    body = "version: 1\ntools:" + TOOL
    with pytest.raises(ToolsFileError) as info:
        load(tmp_path, body)
    line = _line(body, 'handler: {python: "tests.tools.test_deps:customer_tier"}')
    assert str(info.value) == (
        f"{tmp_path / 'tools.yaml'}:{line}: customer_tier: its handler needs "
        "tests.tools.test_deps.Crm, which no entry under `providers:` gives"
    )


def test_the_functions_of_one_tool_share_one_dependency(tmp_path: Path) -> None:
    body = "version: 1\n" + PROVIDERS + "tools:" + TOOL.replace(":known_customer", ":stock_check")
    with pytest.raises(ToolsFileError) as info:
        load(tmp_path, body)
    assert f":{_line(body, 'precheck:')}: customer_tier: its precheck needs " in str(info.value)
    assert "Warehouse but its handler needs tests.tools.test_deps.Crm" in str(info.value)


@pytest.mark.parametrize(
    ("providers", "reason"),
    [
        ("  - tests.tools.test_deps:NOT_A_PROVIDER\n", "is not an app.tools.deps.Provider"),
        ("  - tests.tools.test_deps:CRM\n  - tests.tools.test_deps:CRM\n", "a second provider"),
        ("  - tests.tools.test_deps:NOBODY\n", "provider not found"),
    ],
)
def test_bad_providers_stop_the_load_at_their_line(
    tmp_path: Path, providers: str, reason: str
) -> None:
    body = "version: 1\nproviders:\n" + providers + "tools:" + TOOL
    with pytest.raises(ToolsFileError) as info:
        load(tmp_path, body)
    last = len(("version: 1\nproviders:\n" + providers).splitlines())
    assert str(info.value).startswith(f"{tmp_path / 'tools.yaml'}:{last}:")
    assert reason in str(info.value)


async def test_an_executor_without_a_tools_dependency_refuses_to_start(
    tmp_path: Path, open_db: Any
) -> None:
    registry = registry_of(load(tmp_path, "version: 1\n" + PROVIDERS + "tools:" + TOOL))
    db = await open_db()
    with pytest.raises(ConfigError) as info:
        executor_on(db, registry, deps=Dependencies())
    assert str(info.value) == (
        "tool customer_tier: needs tests.tools.test_deps.Crm, which this deployment does not "
        "provide (list its provider under `providers:` in tools.yaml)"
    )
    executor_on(db, registry, deps=Dependencies({Crm: Crm({})}))  # given: fine


def test_what_a_function_needs_is_read_from_its_context_type() -> None:
    async def bare(ctx: ToolContext, n: int) -> None:
        return None

    async def none(ctx: ToolContext[None]) -> None:
        return None

    async def anything(ctx: ToolContext[Any]) -> None:
        return None

    assert dependency_of(customer_tier) is Crm
    assert dependency_of(json.dumps) is None  # no annotation on a library function
    for fn in (bare, none, anything, no_annotation):
        assert dependency_of(fn) is None, fn
    with pytest.raises(ValueError, match="Later"):
        dependency_of(typed_later)
