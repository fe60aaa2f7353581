"""This process's session leases: who it is as an owner, what it holds, and the loop that keeps
them and takes over sessions no live process owns.

Several Hermes processes share one database; each session's turns run in the one that holds
its lease (`app.storage.leases`). The holder renews every lease it has in one statement every
`renew_s`; a lease not renewed for `ttl_s` (its process died or hangs) is free, and the sweeper
of any process (every `sweep_s`) takes the session over: what the dead owner left running ends
as `interrupted`, what was queued runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.settings import Settings
from app.storage.leases import LeaseStore, new_owner

if TYPE_CHECKING:
    from app.conversation.manager import TurnManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    ttl_s: float
    renew_s: float
    sweep_s: float
    # Leases of processes of this host that no longer exist are free at once (not only when
    # they expire): true only where every owner shares this host's process table (SQLite).
    reap_local: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> LeaseConfig:
        leases = settings.leases
        # One SQLite file is one machine's: a lease of a process of this host that is gone is
        # free at once (a restart takes its sessions back without waiting).
        local = settings.storage.postgres_url is None
        return cls(leases.ttl_s, leases.renew_s, leases.sweep_s, reap_local=local)


@dataclass
class SessionLeases:
    store: LeaseStore
    config: LeaseConfig
    owner: str = field(default_factory=new_owner)
    owned: dict[str, int] = field(default_factory=dict)  # session -> token

    async def renew(self) -> dict[str, int]:
        """Renew what is held; the leases lost (session -> the token this process had)."""
        return await self.store.renew(self.owner, dict(self.owned), self.config.ttl_s)

    async def unowned(self) -> list[str]:
        """Sessions with open turns and no live owner."""
        now = time.time()
        if self.config.reap_local:
            for owner in await self.store.expire_dead_local(now):
                log.warning("process %s is gone: its sessions are free", owner)
        # A turn accepted moments ago is the accepting process's to claim (its wake comes
        # right after the accepting transaction): a sweeper elsewhere leaves it a moment.
        return await self.store.unowned(now, fresh_s=max(1.0, 2 * self.config.sweep_s))


async def keep_leases(manager: TurnManager, leases: SessionLeases) -> None:
    """For the process's life: renew its leases, and take over sessions nobody owns."""
    next_renew = time.monotonic() + leases.config.renew_s
    while True:
        await asyncio.sleep(min(leases.config.sweep_s, leases.config.renew_s))
        try:
            if time.monotonic() >= next_renew:
                next_renew = time.monotonic() + leases.config.renew_s
                await manager.renew()
            await manager.sweep()
        except Exception:
            log.exception("session lease upkeep failed")
