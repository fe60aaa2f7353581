"""Handlers reach the demo backends through the typed `ctx.services`, or answer unavailable."""

from __future__ import annotations

import pytest

from app.demo.services import DemoServices
from app.tools.builtin._demo import demo_store, mailer
from app.tools.context import ToolContext, TurnScope
from app.tools.handlers import ToolHandlerError

SCOPE = TurnScope("default", "u1", "s1", "t1")


def test_without_services_handlers_answer_unavailable_and_retryable() -> None:
    ctx = ToolContext(SCOPE, "c1", "query_order_status", "idem_1")
    with pytest.raises(ToolHandlerError) as store_error:
        demo_store(ctx)
    with pytest.raises(ToolHandlerError) as mail_error:
        mailer(ctx)
    assert (store_error.value.code, mail_error.value.code) == (
        "backend_unavailable",
        "email_unavailable",
    )
    assert store_error.value.retryable and mail_error.value.retryable


def test_with_services_handlers_get_them_typed(services: DemoServices) -> None:
    ctx = ToolContext(SCOPE, "c1", "send_email", "idem_1", services)
    assert demo_store(ctx) is services.store
    assert mailer(ctx) is services.mailer
