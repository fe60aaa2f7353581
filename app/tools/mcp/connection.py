"""One MCP server: a supervisor task that keeps a session open, and calls made through it.

The supervisor connects (handshake and tool listing within the connect timeout), publishes the
tools, then waits until the connection is lost: the server process died, the HTTP transport
failed, the change-notification stream dropped, or a call found the HTTP session expired. Then
it reconnects after a capped, jittered backoff, and starts over with a fresh handshake, so a
restarted server is re-initialised. Calls run in the caller's task against the current session,
each under a timeout and this server's breaker; a call never waits for a reconnect, except once
after an expired session, where the request provably did not run.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.abc
from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    Implementation,
    RequestParamsMeta,
    Tool,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from app import __version__
from app.resilience.breaker import CircuitBreaker
from app.tools.mcp import failures
from app.tools.mcp.config import ServerConfig
from app.tools.mcp.health import Backoff, ConnectionState, Latencies
from app.tools.mcp.secrets import SecretMasker
from app.tools.mcp.transport import StderrTail, open_transport

log = logging.getLogger(__name__)

_MAX_TOOL_PAGES = 100
# Lets a server that cares recognise a retried or replayed call.
IDEMPOTENCY_META_KEY = "io.hermes/idempotency-key"
CLIENT_INFO = Implementation(name="hermes-agent", version=__version__)

ToolsListener = Callable[["ServerConnection", list[Tool]], Awaitable[None]]


@dataclass(frozen=True)
class ConnectOptions:
    connect_timeout_s: float
    env_allowlist: list[str] = field(default_factory=list)
    backoff: Backoff = field(default_factory=Backoff)


class ServerConnection:
    def __init__(
        self,
        config: ServerConfig,
        options: ConnectOptions,
        *,
        masker: SecretMasker,
        breaker: CircuitBreaker,
        on_tools: ToolsListener,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.options = options
        self.masker = masker
        self.breaker = breaker
        self._on_tools = on_tools
        self._on_change = on_change
        self._state = ConnectionState.CONNECTING if config.enabled else ConnectionState.DISABLED
        self.last_error: str | None = None
        self.connected_at: float | None = None
        self.retries = 0  # reconnect attempts since start-up
        self.protocol_version: str | None = None
        self.server_info: dict[str, str] | None = None
        self.latencies = Latencies()
        self.stderr = StderrTail()
        self._client: Client | None = None
        self._lost = asyncio.Event()
        self._ready = asyncio.Event()
        self._refresh_wanted = asyncio.Event()
        self._reconnect_now = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        if self.config.enabled and self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def aclose(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        while task is not None and not task.done():
            # anyio can swallow a cancellation that lands while one of its task groups is
            # failing; ask again until the supervisor has really stopped.
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        if task is not None and not task.cancelled() and task.exception() is not None:
            log.error("MCP server %s: supervisor failed", self.name, exc_info=task.exception())
        if self.config.enabled:
            self.state = ConnectionState.CLOSED

    async def wait_connected(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        except TimeoutError:
            return False
        return True

    @property
    def state(self) -> ConnectionState:
        return self._state

    @state.setter
    def state(self, value: ConnectionState) -> None:
        self._state = value
        self._on_change()

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._lost.is_set()

    # -- the supervisor -------------------------------------------------------------------------

    async def _supervise(self) -> None:
        attempt = 0
        while not self._closing:
            self.state = ConnectionState.CONNECTING
            was_up = False
            try:
                was_up = await self._session()
            except Exception as exc:
                if self._closing:
                    break  # our own shutdown, whatever the SDK made of it
                self._record_failure(exc)
            if self._closing:
                break
            if was_up:
                attempt = 0
            delay = 0.0 if self._reconnect_now else self.options.backoff.delay(attempt)
            self._reconnect_now = False
            attempt += 1
            self.state = ConnectionState.BACKOFF
            log.info(
                "MCP server %s: reconnecting in %.2fs", self.name, delay, extra=self._log_extra()
            )
            await asyncio.sleep(delay)
            self.retries += 1

    async def _session(self) -> bool:
        """Connect, publish tools, and wait for the connection to end. True if it was up."""
        lost = self._lost = asyncio.Event()
        self._refresh_wanted = asyncio.Event()
        transport = open_transport(
            self.config,
            env_allowlist=self.options.env_allowlist,
            connect_timeout_s=self.options.connect_timeout_s,
            masker=self.masker,
            on_end=lambda: self._set_lost(lost),
            stderr=self.stderr,
        )
        client = Client(
            transport,
            mode=self.config.protocol,
            read_timeout_seconds=self.options.connect_timeout_s,
            message_handler=self._on_message,
            client_info=CLIENT_INFO,
            cache=None,
        )
        up = False
        try:
            with anyio.CancelScope() as connecting:
                connecting.deadline = anyio.current_time() + self.options.connect_timeout_s
                async with client, anyio.create_task_group() as tg:
                    try:
                        if self._wants_listen(client):
                            # Subscribe before listing, so no change falls between the two.
                            await tg.start(self._listen, client, lost)
                        tools = await self._list_tools(client)
                        connecting.deadline = math.inf
                        self._adopt(client)
                        await self._on_tools(self, tools)
                        self._client, up = client, True
                        self._ready.set()
                        self.state = ConnectionState.CONNECTED
                        log.info(
                            "MCP server %s connected (%s, %d tools)",
                            self.name,
                            self.protocol_version,
                            len(tools),
                            extra=self._log_extra(),
                        )
                        tg.start_soon(self._refresher, client)
                        await lost.wait()
                    finally:
                        # Before the SDK tears the session down, so no new call picks it up.
                        self._client = None
                        self._set_lost(lost)
                    tg.cancel_scope.cancel()
            if connecting.cancelled_caught and not up:
                raise TimeoutError(f"no answer within {self.options.connect_timeout_s:g}s")
        finally:
            self._client = None
            self._ready.clear()
        if self._reconnect_now:
            self.last_error = "the server dropped the session"
        else:
            tail = self.stderr.last() if self.config.transport == "stdio" else None
            self.last_error = "connection lost" + (f" (stderr: {tail})" if tail else "")
        log.warning("MCP server %s: %s", self.name, self.last_error, extra=self._log_extra())
        return up

    def _adopt(self, client: Client) -> None:
        self.protocol_version = client.protocol_version
        info = client.server_info
        self.server_info = None if info is None else {"name": info.name, "version": info.version}
        self.connected_at = time.time()

    async def _list_tools(self, client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    def _wants_listen(self, client: Client) -> bool:
        tools = client.server_capabilities.tools
        return (
            client.protocol_version in MODERN_PROTOCOL_VERSIONS
            and tools is not None
            and bool(tools.list_changed)
        )

    async def _listen(
        self,
        client: Client,
        lost: asyncio.Event,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """2026-07-28 servers send change notifications only on a `subscriptions/listen`
        stream. The events also reach `_on_message`; here the stream's end matters: it means
        the connection (or the server's state) is gone, so reconnect and list again."""
        started = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for _event in subscription:
                    self._refresh_wanted.set()
        except (ListenNotSupportedError, MCPError) as exc:
            if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
                self._set_lost(lost)
            elif not started:
                log.info("MCP server %s: no change notifications (%s)", self.name, self._mask(exc))
            else:
                self._set_lost(lost)
            return
        except Exception as exc:
            log.info("MCP server %s: change stream ended (%s)", self.name, self._mask(exc))
        finally:
            if not started:
                task_status.started()
        self._set_lost(lost)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._refresh_wanted.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s: transport error: %s", self.name, self._mask(message))

    async def _refresher(self, client: Client) -> None:
        while True:
            await self._refresh_wanted.wait()
            self._refresh_wanted.clear()
            try:
                with anyio.fail_after(self.options.connect_timeout_s):
                    tools = await self._list_tools(client)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    self._set_lost(self._lost)
                    return
                log.warning("MCP server %s: listing tools failed: %s", self.name, self._mask(exc))
                continue
            except (TimeoutError, ValidationError) as exc:
                log.warning("MCP server %s: listing tools failed: %s", self.name, self._mask(exc))
                continue
            await self._on_tools(self, tools)

    def _record_failure(self, exc: BaseException) -> None:
        reason = self._mask(exc)
        tail = self.stderr.last()
        if tail and self.config.transport == "stdio":
            reason = f"{reason} (stderr: {tail})"
        self.last_error = reason
        log.warning(
            "MCP server %s: connection failed: %s", self.name, reason, extra=self._log_extra()
        )

    def mark_lost(self, *, now: bool = False) -> None:
        self._reconnect_now = self._reconnect_now or now
        self._set_lost(self._lost)

    def _set_lost(self, lost: asyncio.Event) -> None:
        if lost is self._lost and not lost.is_set():
            lost.set()
            self._ready.clear()  # callers wait for the next session, not this one
            self._on_change()

    # -- calls ----------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        idempotency_key: str | None = None,
    ) -> CallToolResult:
        meta = (
            None
            if idempotency_key is None
            else cast(RequestParamsMeta, {IDEMPOTENCY_META_KEY: idempotency_key})
        )
        deadline = time.monotonic() + timeout_s
        for attempt in range(2):
            client = self._client
            if client is None or self._lost.is_set():
                # After an expired session the reconnect is already under way: wait for it.
                left = deadline - time.monotonic()
                if attempt == 0 or not await self.wait_connected(max(0.0, left)):
                    raise failures.unavailable(self.name, self.state.value)
                client = self._client
                assert client is not None
            try:
                return await self._call_once(client, tool, arguments, deadline, meta)
            except failures.SessionExpired:
                self.mark_lost(now=True)
        raise failures.session_lost_twice(self.name)

    async def _call_once(
        self,
        client: Client,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        meta: RequestParamsMeta | None,
    ) -> CallToolResult:
        if not self.breaker.allow():
            raise failures.circuit_open(self.name, self.breaker.retry_after())
        remaining = max(0.001, deadline - time.monotonic())
        started = time.perf_counter()
        try:
            with anyio.fail_after(remaining):
                result = await client.call_tool(
                    tool, arguments, read_timeout_seconds=remaining, meta=meta
                )
        except TimeoutError:
            raise self._timed_out(tool, remaining) from None
        except MCPError as exc:
            raise self._protocol_error(tool, exc, remaining) from None
        except (RuntimeError, ValidationError) as exc:
            # The SDK checks results against the tool's output schema and the protocol.
            self.breaker.record_failure(error="invalid_result")
            raise failures.invalid_result(self.name, tool, self._mask(exc)) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise self._crashed(tool) from None
        except BaseException:
            self.breaker.release_probe()
            raise
        self.latencies.add(time.perf_counter() - started)
        self.breaker.record_success()
        return result

    def _protocol_error(self, tool: str, exc: MCPError, timeout_s: float) -> Exception:
        if exc.code == REQUEST_TIMEOUT:
            return self._timed_out(tool, timeout_s)
        if exc.code == CONNECTION_CLOSED:
            return self._crashed(tool)
        if self.config.transport != "stdio" and failures.session_gone(exc):
            self.breaker.release_probe()
            return failures.SessionExpired()
        self.breaker.record_success()  # a definite answer: the server works
        return failures.refused(self.name, tool, self._mask(exc.message))

    def _timed_out(self, tool: str, timeout_s: float) -> Exception:
        self.breaker.record_failure(timeout=True)
        return failures.timed_out(self.name, tool, timeout_s)

    def _crashed(self, tool: str) -> Exception:
        self.breaker.record_failure(error="connection_lost")
        self.mark_lost()
        return failures.crashed(self.name, tool)

    # -- helpers --------------------------------------------------------------------------------

    def _mask(self, value: object) -> str:
        return self.masker.mask(failures.describe(value))

    def _log_extra(self) -> dict[str, Any]:
        return {"mcp_server": self.name, "mcp_state": self.state.value}
