"""Who a request acts as: resolved once per request by the API, passed to every service call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# `customer`: a customer-facing frontend's key (sessions, messages, asking for a person); `agent`
# and above also work the desk (the handoff queue, taking a session over).
Role = Literal["customer", "agent", "operator", "admin"]

_RANK = {"customer": -1, "agent": 0, "operator": 1, "admin": 2}


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    role: Role
    subject: str  # which key (never the key itself), `jwt:<sub>`, or "local"
    # A key or token bound to one customer: it sees and acts on that user's sessions and
    # memories only (404 for the others, as for another tenant's).
    user_id: str | None = None
    # When the credential it came from stops being accepted (Unix seconds: a managed key's
    # expiry, a JWT's `exp`, a desk sign-in's end; None: not by itself). Nothing made from the
    # credential may outlive it. Not part of who the principal is, so not compared.
    expires_at: float | None = field(default=None, compare=False)

    def at_least(self, role: Role) -> bool:
        return _RANK[self.role] >= _RANK[role]

    def may_see_user(self, user_id: str) -> bool:
        return self.user_id is None or self.user_id == user_id


LOCAL = Principal(tenant_id="default", role="admin", subject="local")
