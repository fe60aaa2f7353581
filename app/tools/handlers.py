"""Running a tool's handler: a Python function, or an HTTP endpoint."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from app.errors import ToolHandlerError
from app.tools.context import ToolContext
from app.tools.loader import resolve_python
from app.tools.spec import HttpHandler, PythonHandler, ToolSpec


class Runner(Protocol):
    def __call__(self, ctx: ToolContext[Any], args: dict[str, Any]) -> Awaitable[Any]: ...


def python_runner(handler: PythonHandler, cpu_pool: Executor | None = None) -> Runner:
    fn = resolve_python(handler.target)
    if inspect.iscoroutinefunction(fn):

        async def run_async(ctx: ToolContext[Any], args: dict[str, Any]) -> Any:
            return await fn(ctx, **args)

        return run_async

    async def run_sync(ctx: ToolContext[Any], args: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(cpu_pool, lambda: fn(ctx, **args))

    return run_sync


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def http_runner(handler: HttpHandler, client_factory: Callable[[], httpx.AsyncClient]) -> Runner:
    async def run(ctx: ToolContext[Any], args: dict[str, Any]) -> Any:
        remaining = dict(args)

        def fill(match: re.Match[str]) -> str:
            return quote(str(remaining.pop(match[1], "")), safe="")

        url = _PLACEHOLDER.sub(fill, handler.url)
        headers = {**handler.headers, "Idempotency-Key": ctx.idempotency_key}
        send: dict[str, Any] = (
            {"params": remaining} if handler.method in ("GET", "DELETE") else {"json": remaining}
        )
        response = await client_factory().request(handler.method, url, headers=headers, **send)
        if response.status_code >= 500 or response.status_code == 429:
            raise ToolHandlerError(
                "upstream_error",
                f"{handler.method} {url} answered {response.status_code}",
                retryable=True,
            )
        if response.status_code >= 400:
            raise ToolHandlerError(
                "upstream_rejected",
                f"{handler.method} {url} answered {response.status_code}: {response.text[:200]}",
            )
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return {"text": response.text}

    return run


def build_runner(
    spec: ToolSpec,
    *,
    http_client: Callable[[], httpx.AsyncClient],
    cpu_pool: Executor | None = None,
) -> Runner:
    if isinstance(spec.handler, PythonHandler):
        return python_runner(spec.handler, cpu_pool if spec.cpu_bound else None)
    if isinstance(spec.handler, HttpHandler):
        return http_runner(spec.handler, http_client)
    raise TypeError(f"no local runner for {spec.handler!r}")
