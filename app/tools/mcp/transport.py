"""Open the SDK transport for one server, and notice when it ends.

The SDK client keeps looking connected after a stdio server died: only its receive loop sees
the end of the stream. `open_transport` hands the SDK a read stream that reports when that
loop lets go of it, which is how the connection supervisor learns of a crash at once.

A stdio server's stderr is read line by line into Hermes' log (secrets masked), and its last
lines are kept for the status page: "exited at start-up" is more useful with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.tools.mcp.config import HttpTarget, ServerConfig, StdioTarget
from app.tools.mcp.secrets import SecretMasker

log = logging.getLogger(__name__)
server_log = logging.getLogger("app.tools.mcp.server")

SSE_READ_TIMEOUT_S = 300.0
STDERR_DRAIN_S = 0.5


class _WatchedReadStream:
    """Delegates to the SDK's read stream; calls `on_end` when the receive loop exits it."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def __aenter__(self) -> _WatchedReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
            return result
        finally:
            self._on_end()

    def __aiter__(self) -> Any:
        return self._inner.__aiter__()

    async def __anext__(self) -> Any:
        return await self._inner.__anext__()

    async def receive(self) -> Any:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`
        return getattr(self._inner, name)


def child_environment(
    declared: Mapping[str, str], allowlist: list[str], parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allow-listed variables of the parent, then the server's declared `env` over them.

    (The SDK adds HOME, LOGNAME, PATH, SHELL, TERM and USER from the parent in any case.)
    """
    source = os.environ if parent is None else parent
    env = {name: source[name] for name in allowlist if name in source}
    env.update(declared)
    return env


class StderrTail:
    """The last lines a stdio server wrote to stderr."""

    def __init__(self, keep: int = 5) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def last(self) -> str | None:
        return self.lines[-1] if self.lines else None


@contextlib.asynccontextmanager
async def open_transport(
    server: ServerConfig,
    *,
    env_allowlist: list[str],
    connect_timeout_s: float,
    masker: SecretMasker,
    on_end: Callable[[], None],
    stderr: StderrTail,
) -> AsyncIterator[tuple[Any, Any]]:
    target = server.target
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(target, StdioTarget):
            params = StdioServerParameters(
                command=target.command,
                args=list(target.args),
                env=child_environment(target.env, env_allowlist),
                cwd=target.cwd,
            )
            pumps: list[asyncio.Task[None]] = []
            # Registered first so it runs last: after the SDK has stopped the process, the
            # pump reads what the server wrote on its way out, then meets the end of the pipe.
            stack.push_async_callback(_drain, pumps)
            read_fd, write_fd = os.pipe()
            errlog = os.fdopen(write_fd, "w")
            try:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            except BaseException:
                os.close(read_fd)
                raise
            finally:
                errlog.close()  # the child has its own copy
            pumps.append(asyncio.create_task(_pump_stderr(read_fd, server.name, masker, stderr)))
        elif isinstance(target, HttpTarget) and target.sse:
            read, write = await stack.enter_async_context(
                sse_client(
                    target.url,
                    headers=target.headers,
                    timeout=connect_timeout_s,
                    sse_read_timeout=SSE_READ_TIMEOUT_S,
                )
            )
        else:
            assert isinstance(target, HttpTarget)
            http = await stack.enter_async_context(
                create_mcp_http_client(
                    headers=target.headers,
                    timeout=httpx2.Timeout(connect_timeout_s, read=SSE_READ_TIMEOUT_S),
                )
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(target.url, http_client=http)
            )
        yield _WatchedReadStream(read, on_end), write


async def _drain(pumps: list[asyncio.Task[None]]) -> None:
    for task in pumps:
        # A grandchild can keep the pipe open after the server is gone: bounded wait.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), STDERR_DRAIN_S)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _pump_stderr(fd: int, server: str, masker: SecretMasker, tail: StderrTail) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb")
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while line := await reader.readline():
            text = masker.mask(line.decode("utf-8", "replace").rstrip())
            if text:
                tail.lines.append(text)
                server_log.info("%s: %s", server, text, extra={"mcp_server": server})
    except (OSError, ValueError):
        pass
    finally:
        transport.close()
