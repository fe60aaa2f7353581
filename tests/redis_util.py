"""Redis for tests: a key prefix of its own per test (deleted afterwards), a TCP proxy that
can cut Redis off and bring it back while the service runs, and a `redis-server` of a test's
own to kill and start again (a real restart).

Tests skip when Redis is unreachable, except in CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from tests.serve_util import free_port

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextlib.contextmanager
def key_prefix() -> Iterator[str]:
    """A unique prefix `hermes-test-<hex>`; every key `<prefix>*` is deleted afterwards."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        client.close()
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Redis is not reachable at {REDIS_URL}: {exc}")
    prefix = f"hermes-test-{secrets.token_hex(6)}"
    try:
        yield prefix
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    with key_prefix() as prefix:
        yield prefix


def proxied_url(port: int) -> str:
    """`REDIS_URL` (its credentials and database) through a proxy listening on `port`."""
    parts = urlsplit(REDIS_URL)
    netloc = f"127.0.0.1:{port}"
    if parts.username or parts.password:
        netloc = f"{parts.netloc.rpartition('@')[0]}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def redis_proxy() -> TcpProxy:
    """A proxy (not started yet) in front of `REDIS_URL`'s server."""
    parts = urlsplit(REDIS_URL)
    return TcpProxy(parts.hostname or "127.0.0.1", parts.port or 6379)


@contextlib.asynccontextmanager
async def proxied_redis() -> AsyncIterator[tuple[TcpProxy, str]]:
    """A started proxy in front of `REDIS_URL`'s server and the URL that goes through it; the
    proxy is closed afterwards."""
    proxy = redis_proxy()
    port = await proxy.start()
    try:
        yield proxy, proxied_url(port)
    finally:
        await proxy.close()


class TcpProxy:
    """Forwards 127.0.0.1:<port> to host:port. `cut()` closes every open connection and
    refuses new ones (accepted and closed at once) until `restore()`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def cut(self) -> None:
        self._cut = True
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._writers.clear()

    async def restore(self) -> None:
        self._cut = False

    async def close(self) -> None:
        await self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.close()
            self._writers.discard(sink)


class RedisServer:
    """A `redis-server` of the test's own on a free port (never the shared one): `kill()` ends
    it as a crash would (SIGKILL: every client connection dies), `start()` brings up a fresh one
    on the same port, empty (no persistence), as a restarted Redis without a disk comes back."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI") == "true":
                raise AssertionError("redis-server is not installed")
            pytest.skip("redis-server is not installed")
        self.directory.mkdir(parents=True, exist_ok=True)
        # No persistence: the restarted server is empty, as the compose file's would be.
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        options += ["--appendonly", "no", "--dir", str(self.directory)]
        self._proc = subprocess.Popen(
            [binary, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    client.ping()
                    return
                except (redis.RedisError, OSError):
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"redis-server on {self.port} did not start") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)
        self._proc = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()
