"""One HTTP client per model server, shared by every model that talks to it.

A primary and a fallback behind one gateway share connections; the pool is sized by
`HERMES_MODEL_MAX_CONNECTIONS` (per server) and keeps connections alive, so a busy service
reuses them instead of opening one per call. The transport is aiohttp: per short streamed
completion it costs about a third of httpx's time (bench/model_client.py), and under load the
model client was the event loop's largest single cost after the HTTP server itself. A session
is opened on first use (aiohttp wants a running event loop) and closed when the last model
that leased it is closed (at shutdown, by the chain).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp


@dataclass
class _Lease:
    holders: int
    session: aiohttp.ClientSession | None = field(default=None)


class ModelClients:
    def __init__(self, *, max_connections: int, timeout_s: float) -> None:
        self._max_connections = max_connections
        # The chain bounds every wait on a model; these bound the socket operations beneath it.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._leases: dict[str, _Lease] = {}

    def lease(self, base_url: str) -> None:
        """Take a share of `base_url`'s client; each lease is given back with `release`."""
        lease = self._leases.setdefault(base_url, _Lease(0))
        lease.holders += 1

    def session(self, base_url: str) -> aiohttp.ClientSession:
        """The client for `base_url` (leased before), opened on first use."""
        lease = self._leases.setdefault(base_url, _Lease(0))
        if lease.session is None or lease.session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=self._max_connections
            )
            lease.session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, auto_decompress=True
            )
        return lease.session

    async def release(self, base_url: str) -> None:
        lease = self._leases.get(base_url)
        if lease is None:
            return
        lease.holders -= 1
        if lease.holders <= 0:
            del self._leases[base_url]
            if lease.session is not None:
                await lease.session.close()

    @property
    def open_clients(self) -> int:
        return sum(1 for lease in self._leases.values() if lease.holders > 0)
