"""Refusals of the demo backend. Each carries a stable `code` the tool layer passes to the
model unchanged, so the model can act on it (ask for another order id, a lower amount...)."""

from __future__ import annotations

from app.errors import InternalError


class DemoError(InternalError):
    """A refusal the tool layer turns into a `ToolHandlerError` with the same code."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


def order_not_found(order_id: str) -> DemoError:
    # The same words whether the order is missing or someone else's: existence must not leak.
    return DemoError(
        "order_not_found",
        f"no order {order_id} was found for this customer; ask the customer to check the "
        "12-digit order number",
    )


def shipment_not_found(tracking_number: str) -> DemoError:
    return DemoError(
        "shipment_not_found",
        f"no shipment {tracking_number} was found for this customer; ask the customer to check "
        "the tracking number, or look the order up with query_order_status",
    )


def customer_not_found() -> DemoError:
    return DemoError(
        "customer_not_found",
        "this session is not linked to a customer account, so account actions are not "
        "possible; offer a handoff to a human agent",
    )
