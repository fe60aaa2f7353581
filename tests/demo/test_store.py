"""DemoStore: ownership-scoped reads, and an email outbox that sends once per key even when
the caller gives up mid-send."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from app.demo.errors import DemoError
from app.demo.fixtures import FOREIGN_ORDER, HAN_MEIMEI, LI_LEI, SHIPPED_ORDER, SHIPPED_TRACKING
from app.demo.generator import regenerate
from app.demo.mail import MailComposeError, MailDeliveryError
from app.demo.outbox import Draft
from app.demo.records import Actor
from app.demo.store import DemoStore
from app.demo.testing import RecordingMailer
from tests.demo.conftest import query


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
    assert await store.order_for(LI_LEI, FOREIGN_ORDER) is None
    order = await store.order_for(HAN_MEIMEI, FOREIGN_ORDER)
    assert order is not None and order.customer_id == HAN_MEIMEI
    assert await store.shipment_for(HAN_MEIMEI, SHIPPED_TRACKING) is None
    shipment = await store.shipment_for(LI_LEI, SHIPPED_TRACKING)
    assert shipment is not None and shipment.order_id == SHIPPED_ORDER
    customer = await store.customer(LI_LEI)
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
