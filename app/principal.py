"""Who a request acts as: resolved once per request by the API, passed to every service call.

A user binding goes with the role, always (`binding_problem`): a `customer` principal is bound
to exactly one customer, and sees and acts on that customer's sessions and memories only; a
staff principal (`agent` and above) is bound to none and works its whole tenant, as its role
allows. Every way a principal is made (managed keys, JWTs, bootstrap keys, signed tokens)
refuses the other combinations, and a `Principal` cannot be built with one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# `customer`: a customer-facing frontend's key for one customer (sessions, messages, asking for
# a person); `agent` and above also work the desk (the handoff queue, taking a session over).
Role = Literal["customer", "agent", "operator", "admin"]

_RANK = {"customer": -1, "agent": 0, "operator": 1, "admin": 2}


def binding_problem(role: str, user_id: str | None) -> str | None:
    """What is wrong with a role and a user binding together, or None when they fit."""
    if role == "customer" and not user_id:
        return "a customer key must be bound to one customer (a user id)"
    if role != "customer" and user_id is not None:
        return f"only customer keys are bound to a user; a key of role {role} works its tenant"
    return None


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    role: Role
    subject: str  # which key (never the key itself), `jwt:<sub>`, or "local"
    # The customer a `customer` principal acts for (None for staff): that user's sessions and
    # memories only, 404 for the others, as for another tenant's.
    user_id: str | None = None
    # When the credential it came from stops being accepted (Unix seconds: a managed key's
    # expiry, a JWT's `exp`, a desk sign-in's end; None: not by itself). Nothing made from the
    # credential may outlive it. Not part of who the principal is, so not compared.
    expires_at: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        problem = binding_problem(self.role, self.user_id)
        if problem is not None:
            raise ValueError(problem)

    def at_least(self, role: Role) -> bool:
        return _RANK[self.role] >= _RANK[role]

    def may_see_user(self, user_id: str) -> bool:
        return self.user_id is None or self.user_id == user_id


LOCAL = Principal(tenant_id="default", role="admin", subject="local")
