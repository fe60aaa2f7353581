"""Where a write goes and under which lease: the handle every write names.

`SessionWriter(session_id, fence)` is passed to whatever writes (`Database.write`/`submit`,
`Store.transact`/`transact_nowait`, the stores' write methods), never found in a context:

- its `session_id` picks the write's writer lane (app/storage/writer.py): every write of one
  session takes that session's lane, so the session's writes keep their submission order and
  their commit order, whoever makes them (its worker, a request, the watchdog);
- its `fence`, when there is one, is the session's lease as its worker holds it
  (app/storage/fence.py): checked first inside the write's own transaction, so a worker whose
  lease was taken over raises `LeaseLost` before it writes anything.

The session's worker holds the handle with the lease's fence while it owns the session
(`TurnManager`, app/conversation/manager.py) and hands it down to its claims, its turn's
pipeline and everything the turn writes through. A request writing for a session names
`SessionWriter(session_id)`: the session's lane, no lease (a request does not own the session;
what it writes is ordered with the worker's writes by the lane and the session's row locks).
A write that belongs to no one session (keys, audit, MCP definitions, sweeps over many
sessions, purges) names `NO_SESSION` (None, where a `SessionWriter | None` is taken): the first
lane, no lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.storage.fence import Fence


@dataclass(frozen=True)
class SessionWriter:
    """The session a write is for (its lane) and the lease it writes under (its fence)."""

    session_id: str
    fence: Fence | None = None

    def __post_init__(self) -> None:
        if self.fence is not None and self.fence.session_id != self.session_id:
            raise ValueError(
                f"the fence of session {self.fence.session_id} cannot fence {self.session_id}"
            )


# Writes of no one session: the first lane, in order among themselves, under no lease.
NO_SESSION: Final = None
