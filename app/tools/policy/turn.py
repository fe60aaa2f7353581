"""What the runtime allows in one turn, beyond each tool's own declaration."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.tools.policy.taint import Taint


@dataclass
class TurnPolicy:
    # The tools offered to the model in this turn; None when nothing narrowed them (calls
    # outside a turn, or a turn whose intent was not clear enough to narrow).
    offered: frozenset[str] | None = None
    # Calls the customer confirmed in this turn; they run although the tool was offered in the
    # turn that proposed them, not necessarily in this one.
    confirmed: frozenset[str] = frozenset()
    taint: Taint = field(default_factory=Taint)

    def allows(self, name: str, call_id: str) -> bool:
        return self.offered is None or name in self.offered or call_id in self.confirmed
