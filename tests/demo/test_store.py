"""DemoStore: reads and writes scoped to the owning customer within the tenants the data
belongs to, and an email outbox that sends once per key even when the caller gives up
mid-send."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from email.message import EmailMessage
from pathlib import Path

import pytest

from app.demo.errors import DemoError
from app.demo.fixtures import (
    DELIVERED_ORDER,
    FOREIGN_ORDER,
    HAN_MEIMEI,
    LI_LEI,
    SHIPPED_ORDER,
    SHIPPED_TRACKING,
)
from app.demo.generator import regenerate
from app.demo.mail import MailComposeError, MailDeliveryError
from app.demo.outbox import Draft
from app.demo.records import Actor
from app.demo.store import DemoStore
from app.demo.testing import RecordingMailer
from tests.demo.conftest import dump, query


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DemoStore]:
    path = tmp_path / "demo.db"
    regenerate(path)
    demo = await DemoStore(path).open()
    yield demo
    await demo.close()


def actor(key: str, user: str = LI_LEI) -> Actor:
    return Actor("default", user, "sess_store", key)


DRAFT = Draft("<idem_x@example.com>", "hermes@example.com", "a@example.com", "Hi", "Body")


async def test_reads_are_scoped_to_the_owner(store: DemoStore) -> None:
    assert await store.order_for("default", LI_LEI, FOREIGN_ORDER) is None
    order = await store.order_for("default", HAN_MEIMEI, FOREIGN_ORDER)
    assert order is not None and order.customer_id == HAN_MEIMEI
    assert await store.shipment_for("default", HAN_MEIMEI, SHIPPED_TRACKING) is None
    shipment = await store.shipment_for("default", LI_LEI, SHIPPED_TRACKING)
    assert shipment is not None and shipment.order_id == SHIPPED_ORDER
    customer = await store.customer("default", LI_LEI)
    assert customer is not None and customer.name == "李雷"


async def test_a_key_claimed_by_a_live_send_is_not_sent_again(
    store: DemoStore, tmp_path: Path
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    class SlowMailer(RecordingMailer):
        async def send(self, message: EmailMessage) -> None:
            entered.set()
            await release.wait()
            await super().send(message)

    mailer = SlowMailer()
    first = asyncio.create_task(store.send_email(actor("idem_live"), DRAFT, mailer))
    await asyncio.wait_for(entered.wait(), 5)
    with pytest.raises(DemoError) as caught:
        await store.send_email(actor("idem_live"), DRAFT, mailer)
    assert caught.value.code == "email_in_progress"
    release.set()
    sent = await asyncio.wait_for(first, 5)
    assert sent.status == "sent"
    assert len(mailer.sent) == 1


async def test_a_cancelled_caller_does_not_lose_the_sent_mark(
    store: DemoStore, tmp_path: Path
) -> None:
    entered, release, delivered = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class SlowMailer(RecordingMailer):
        async def send(self, message: EmailMessage) -> None:
            entered.set()
            await release.wait()
            await super().send(message)
            delivered.set()

    mailer = SlowMailer()
    caller = asyncio.create_task(store.send_email(actor("idem_cancel"), DRAFT, mailer))
    await asyncio.wait_for(entered.wait(), 5)
    caller.cancel()  # as a tool timeout would
    release.set()
    await asyncio.wait_for(delivered.wait(), 5)
    # The shielded delivery still marks the row; closing the store waits for it.
    await store.close()
    assert query(
        tmp_path / "demo.db", "SELECT status FROM emails WHERE idempotency_key = 'idem_cancel'"
    ) == [("sent",)]
    assert len(mailer.sent) == 1
    assert caller.cancelled()


async def test_a_stale_claim_is_sent_again_and_the_late_attempt_changes_nothing(
    store: DemoStore, tmp_path: Path
) -> None:
    store.email_stale_after_s = 0.0  # every `sending` row counts as abandoned
    entered, release = asyncio.Event(), asyncio.Event()

    class HangingMailer(RecordingMailer):
        async def send(self, message: EmailMessage) -> None:
            entered.set()
            await release.wait()
            raise MailDeliveryError("the stale attempt fails at last", permanent=False)

    stale = asyncio.create_task(store.send_email(actor("idem_stale"), DRAFT, HangingMailer()))
    await asyncio.wait_for(entered.wait(), 5)
    mailer = RecordingMailer()
    sent = await store.send_email(actor("idem_stale"), DRAFT, mailer)
    assert sent.status == "sent" and sent.attempts == 2
    assert [m["Message-ID"] for m in mailer.sent] == [DRAFT.message_id]
    release.set()
    with pytest.raises(MailDeliveryError):
        await asyncio.wait_for(stale, 5)
    await store.close()
    assert query(
        tmp_path / "demo.db", "SELECT status FROM emails WHERE idempotency_key = 'idem_stale'"
    ) == [("sent",)]


async def test_another_user_cannot_reuse_a_key(store: DemoStore) -> None:
    mailer = RecordingMailer()
    await store.send_email(actor("idem_owned"), DRAFT, mailer)
    with pytest.raises(DemoError) as caught:
        await store.send_email(actor("idem_owned", HAN_MEIMEI), DRAFT, mailer)
    assert caught.value.code == "idempotency_conflict"
    assert len(mailer.sent) == 1


async def test_a_message_that_cannot_be_built_leaves_the_row_failed_not_sending(
    store: DemoStore, tmp_path: Path
) -> None:
    mailer = RecordingMailer()
    bad = Draft(DRAFT.message_id, DRAFT.sender, DRAFT.recipient, "Hi\r\nBcc: x@evil.com", "Body")
    with pytest.raises(MailComposeError):
        await store.send_email(actor("idem_bad_header"), bad, mailer)
    [(status, error)] = query(
        tmp_path / "demo.db",
        "SELECT status, error FROM emails WHERE idempotency_key = 'idem_bad_header'",
    )
    assert status == "failed"
    assert "cannot be built" in error and "linefeed or carriage return" in error
    assert mailer.sent == []
    # Failed may be tried again with the same key; it fails the same way and stays failed.
    with pytest.raises(MailComposeError):
        await store.send_email(actor("idem_bad_header"), bad, mailer)
    assert query(
        tmp_path / "demo.db",
        "SELECT status, attempts FROM emails WHERE idempotency_key = 'idem_bad_header'",
    ) == [("failed", 2)]


async def test_an_unexpected_mailer_error_leaves_the_row_failed_not_sending(
    store: DemoStore, tmp_path: Path
) -> None:
    class BrokenMailer(RecordingMailer):
        async def send(self, message: EmailMessage) -> None:
            raise RuntimeError("a bug in the transport")

    with pytest.raises(RuntimeError):
        await store.send_email(actor("idem_broken"), DRAFT, BrokenMailer())
    assert query(
        tmp_path / "demo.db",
        "SELECT status, error FROM emails WHERE idempotency_key = 'idem_broken'",
    ) == [("failed", "RuntimeError")]
    # Once it does go out, it goes out once.
    mailer = RecordingMailer()
    first = await store.send_email(actor("idem_broken"), DRAFT, mailer)
    again = await store.send_email(actor("idem_broken"), DRAFT, mailer)
    assert (first.status, again.status, len(mailer.sent)) == ("sent", "sent", 1)


async def test_another_tenant_finds_no_customer_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    regenerate(path)
    before = dump(path)
    store = await DemoStore(path, tenants=["default", "acme"]).open()
    try:
        # The same user id in a tenant the data does not belong to is nobody here.
        assert await store.customer("globex", LI_LEI) is None
        assert await store.order_for("globex", LI_LEI, SHIPPED_ORDER) is None
        assert await store.shipment_for("globex", LI_LEI, SHIPPED_TRACKING) is None
        outsider = Actor("globex", LI_LEI, "sess_b", "idem_globex_1")
        outsider_attempts: dict[str, Callable[[], Awaitable[object]]] = {
            "refund": lambda: store.request_refund(
                outsider, order_id=DELIVERED_ORDER, amount_cents=100, reason=None
            ),
            "return": lambda: store.request_return(outsider, order_id=DELIVERED_ORDER, reason=None),
            "ticket": lambda: store.create_ticket(
                outsider, category="other", summary="a question", priority="normal", order_id=None
            ),
            "ticket_on_order": lambda: store.create_ticket(
                outsider,
                category="other",
                summary="a question",
                priority="normal",
                order_id=DELIVERED_ORDER,
            ),
            "reset": lambda: store.reset_password(outsider, phone="13800138000"),
            "contact": lambda: store.update_contact(outsider, field="email", value="x@example.com"),
        }
        assert {name: await refusal(attempt) for name, attempt in outsider_attempts.items()} == {
            "refund": "order_not_found",
            "return": "order_not_found",
            "ticket": "customer_not_found",
            "ticket_on_order": "customer_not_found",
            "reset": "customer_not_found",
            "contact": "customer_not_found",
        }
        # Exactly what an unknown customer of an owning tenant is told.
        nobody = Actor("acme", "cust_9999", "sess_a", "idem_acme_1")
        unknown = await refusal(
            lambda: store.request_refund(
                nobody, order_id=DELIVERED_ORDER, amount_cents=100, reason=None
            )
        )
        assert unknown == "order_not_found"
        assert (
            await refusal(lambda: store.reset_password(nobody, phone="1")) == "customer_not_found"
        )
        # Each tenant the data belongs to sees its customers.
        for tenant in ("default", "acme"):
            order = await store.order_for(tenant, LI_LEI, SHIPPED_ORDER)
            assert order is not None and order.customer_id == LI_LEI
    finally:
        await store.close()
    assert dump(path) == before


async def refusal(attempt: Callable[[], Awaitable[object]]) -> str:
    with pytest.raises(DemoError) as refused:
        await attempt()
    return refused.value.code


async def test_a_refund_refusal_says_what_the_refund_would_answer_and_changes_nothing(
    store: DemoStore,
) -> None:
    before = dump(store.path)
    who = actor("idem_check")

    async def why(order_id: str, cents: int | None) -> str | None:
        refused = await store.refund_refusal(who, order_id=order_id, amount_cents=cents)
        return None if refused is None else refused.code

    assert await why(DELIVERED_ORDER, None) is None  # 89.00: refunded as a whole, at once
    assert await why(DELIVERED_ORDER, 8901) == "amount_exceeds_total"
    assert await why(FOREIGN_ORDER, 100) == "order_not_found"
    assert dump(store.path) == before
    # The refund itself agrees: what the check lets through is filed, then nothing is left.
    await store.request_refund(who, order_id=DELIVERED_ORDER, amount_cents=8900, reason=None)
    assert await why(DELIVERED_ORDER, None) is None  # the same key: the filed one is returned
    other = actor("idem_check_2")
    refused = await store.refund_refusal(other, order_id=DELIVERED_ORDER, amount_cents=100)
    assert refused is not None and refused.code == "order_not_refundable"  # now refunded


async def test_a_return_refusal_says_what_the_return_would_answer_and_changes_nothing(
    store: DemoStore,
) -> None:
    before = dump(store.path)
    who = actor("idem_return_check")

    async def why(order_id: str) -> str | None:
        refused = await store.return_refusal(who, order_id=order_id)
        return None if refused is None else refused.code

    assert await why(DELIVERED_ORDER) is None
    assert await why(FOREIGN_ORDER) == "order_not_found"
    assert await why(SHIPPED_ORDER) == "order_not_returnable"
    assert dump(store.path) == before
    await store.request_return(who, order_id=DELIVERED_ORDER, reason=None)
    assert await why(DELIVERED_ORDER) is None  # the same key: the created one is returned
    refused = await store.return_refusal(actor("idem_return_2"), order_id=DELIVERED_ORDER)
    assert refused is not None and refused.code == "return_already_requested"
