"""One HTTP client per model server, shared by every model that talks to it.

A primary and a fallback behind one gateway share connections; the pool is sized by
`HERMES_MODEL_MAX_CONNECTIONS` (per server), and as many connections are kept alive as may be
open, so a busy service reuses them instead of opening one per call. A client is closed when
the last model that leased it is closed (at shutdown, by the chain).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx


@dataclass
class _Lease:
    client: httpx.AsyncClient
    holders: int


class ModelClients:
    def __init__(self, *, max_connections: int = 100, timeout_s: float = 60.0) -> None:
        # httpx logs every request at INFO with its URL: the model server's address would reach
        # the log on every call (importing LiteLLM used to quiet it; it is no longer imported).
        logging.getLogger("httpx").setLevel(logging.WARNING)
        # Idle connections expire after httpx's 5 s, before common servers' own keep-alive
        # timeouts close them under a request.
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._timeout = httpx.Timeout(timeout_s)
        self._leases: dict[str, _Lease] = {}

    def lease(self, base_url: str) -> httpx.AsyncClient:
        """The client for `base_url`; each lease is given back with `release`."""
        lease = self._leases.get(base_url)
        if lease is None:
            client = httpx.AsyncClient(limits=self._limits, timeout=self._timeout)
            lease = self._leases[base_url] = _Lease(client, 0)
        lease.holders += 1
        return lease.client

    async def release(self, base_url: str) -> None:
        lease = self._leases.get(base_url)
        if lease is None:
            return
        lease.holders -= 1
        if lease.holders <= 0:
            del self._leases[base_url]
            await lease.client.aclose()

    @property
    def open_clients(self) -> int:
        return len(self._leases)
