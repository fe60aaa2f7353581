"""What every demo handler shares: the acting customer, money in cents, and turning the shop's
refusals into `ToolHandlerError`s the model can act on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation

from app.demo.errors import DemoError
from app.demo.records import Actor
from app.errors import ToolHandlerError
from app.tools.context import ToolContext


def actor(ctx: ToolContext[object]) -> Actor:
    # The session's user is the customer, within the session's tenant (the store refuses
    # tenants the demo data does not belong to); ids the model passes are only ever looked up
    # *within* this customer's records.
    return Actor(ctx.tenant_id, ctx.user_id, ctx.session_id, ctx.idempotency_key)


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    try:
        yield
    except DemoError as exc:
        raise ToolHandlerError(exc.code, exc.message, retryable=exc.retryable) from None


def refuse(error: DemoError) -> ToolHandlerError:
    return ToolHandlerError(error.code, error.message, retryable=error.retryable)


def money(cents: int) -> float:
    return round(cents / 100, 2)


def to_cents(amount: float) -> int:
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        raise ToolHandlerError("invalid_amount", f"{amount!r} is not an amount") from None
    if not value.is_finite():  # validation refuses these first; a handler must not trust that
        raise ToolHandlerError("invalid_amount", f"{amount!r} is not an amount")
    if value != value.quantize(Decimal("0.01")):
        raise ToolHandlerError(
            "invalid_amount", f"{amount} has more than two decimals; give the amount in yuan.fen"
        )
    return int(value * 100)
