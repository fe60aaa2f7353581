"""For tests and benchmarks: run an MCP server over HTTP as a subprocess.

`HttpServerProcess` starts a command that prints `listening on <url>` once it accepts
connections (as `tests/mcp_servers/scripted_server.py --http` does), and can kill and restart
it on the same port, the way a redeployed server comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

SCRIPTED_SERVER = Path(__file__).with_name("scripted_server.py")
_LISTENING = re.compile(rb"listening on (http://127\.0\.0\.1:(\d+)\S*)")


def scripted_stdio(*extra: str, **options: object) -> dict[str, object]:
    """An `mcpServers` entry that runs the scripted test server over stdio."""
    return {"command": sys.executable, "args": [str(SCRIPTED_SERVER), *extra], **options}


class HttpServerProcess:
    def __init__(self, argv: Sequence[str | Path], *, start_timeout_s: float = 30.0) -> None:
        self.argv = [str(a) for a in argv]
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.url = ""
        self.process: asyncio.subprocess.Process | None = None

    @classmethod
    def scripted(cls, *extra: str) -> HttpServerProcess:
        """The scripted test server; streamable HTTP unless `extra` has `--sse`."""
        transport = [] if "--sse" in extra else ["--http"]
        return cls([sys.executable, SCRIPTED_SERVER, *transport, *extra])

    async def start(self) -> str:
        """Start (on the same port as before, if there was a before); returns the URL."""
        # A process that crashed on its own is reaped first: left unawaited, its handle was
        # collected "still running" in some later test (a ResourceWarning, under load).
        await self.stop()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, "--port", str(self.port), stdout=asyncio.subprocess.PIPE
        )
        assert self.process.stdout is not None
        async with asyncio.timeout(self.start_timeout_s):
            while True:
                line = await self.process.stdout.readline()
                if not line:
                    raise RuntimeError(f"{self.argv} exited before it was listening")
                found = _LISTENING.search(line)
                if found:
                    self.url, self.port = found[1].decode(), int(found[2])
                    return self.url

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.kill()
        await process.wait()

    async def restart(self) -> str:
        await self.stop()
        return await self.start()


@contextlib.asynccontextmanager
async def http_server(*extra: str) -> AsyncIterator[HttpServerProcess]:
    server = HttpServerProcess.scripted(*extra)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
