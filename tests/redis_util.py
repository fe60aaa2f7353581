"""Redis for tests: the server's URL, a unique key prefix per test (cleaned up after it), and a
TCP proxy that can cut every connection through it, to make Redis "go away" while the service
runs and come back.

A test that needs Redis skips when it is unreachable, unless env CI is "true": there it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
import redis

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A prefix `hermes-test-<hex>` of this test's own; every key under it is deleted after."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Redis is unreachable at {REDIS_URL}: {exc}")
    prefix = f"hermes-test-{uuid.uuid4().hex}"
    try:
        yield prefix
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
        client.close()


class TcpProxy:
    """Forwards 127.0.0.1:<port> to host:port. `cut()` closes every open connection and refuses
    new ones (accepted, then closed at once) until `restore()`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._cut = False
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def cut(self) -> None:
        self._cut = True
        await self._close_all()

    async def restore(self) -> None:
        self._cut = False

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._close_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.close()
        pipes = list(self._pipes)
        for pipe in pipes:
            pipe.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
        self._writers.clear()

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
        for source, target in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, target, (writer, up_writer)))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        target: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            while data := await source.read(65536):
                target.write(data)
                await target.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            # One side ended: end the connection on both sides.
            for writer in pair:
                self._writers.discard(writer)
                with contextlib.suppress(RuntimeError):
                    writer.close()
