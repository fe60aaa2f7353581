"""send_email delivers over real SMTP (a local aiosmtpd server), once per idempotency key."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.testing import SmtpSink
from app.demo.tools.mail import send_email
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms, count

TO = "li.lei@example.com"
SUBJECT = "您的退款申请已受理"
BODY = "李雷您好：\n您的订单 202405201235 的退款 89.00 元已受理。"


async def test_the_message_arrives_with_its_content(ctx: Ctx, smtp_sink: SmtpSink) -> None:
    data = await send_email(ctx(key="idem_mail_1"), to=TO, subject=SUBJECT, body=BODY)
    conforms("send_email", data)
    assert data["status"] == "sent"
    assert "idem_mail_1" in data["message_id"]
    [message] = smtp_sink.received()
    assert message["Message-ID"] == data["message_id"]
    assert message["To"] == TO
    assert message["From"] == "hermes@example.com"
    assert message["Subject"] == SUBJECT
    assert message.get_content().replace("\r\n", "\n").strip() == BODY  # SMTP sends CRLF


async def test_a_repeated_key_never_sends_twice(
    ctx: Ctx, smtp_sink: SmtpSink, demo_path: Path
) -> None:
    first = await send_email(ctx(key="idem_mail_2"), to=TO, subject=SUBJECT, body=BODY)
    again = await send_email(ctx(key="idem_mail_2"), to=TO, subject=SUBJECT, body=BODY)
    assert again == first
    assert len(smtp_sink.received(first["message_id"])) == 1
    assert len(smtp_sink.received()) == 1
    other = await send_email(ctx(key="idem_mail_3"), to=TO, subject=SUBJECT, body=BODY)
    assert other["message_id"] != first["message_id"]
    assert len(smtp_sink.received()) == 2
    assert count(demo_path, "emails WHERE status = 'sent'") == 2


async def test_a_failed_send_can_be_retried_with_the_same_key(
    ctx: Ctx, smtp_sink: SmtpSink, demo_path: Path
) -> None:
    smtp_sink.fail_next = 1
    with pytest.raises(ToolHandlerError) as caught:
        await send_email(ctx(key="idem_mail_4"), to=TO, subject=SUBJECT, body=BODY)
    assert caught.value.code == "email_unavailable"
    assert caught.value.retryable
    assert smtp_sink.received() == []
    assert count(demo_path, "emails WHERE status = 'failed'") == 1
    data = await send_email(ctx(key="idem_mail_4"), to=TO, subject=SUBJECT, body=BODY)
    await send_email(ctx(key="idem_mail_4"), to=TO, subject=SUBJECT, body=BODY)
    assert len(smtp_sink.received(data["message_id"])) == 1
    assert count(demo_path, "emails WHERE status = 'sent' AND attempts = 2") == 1


async def test_an_unreachable_server_is_a_retryable_error(ctx: Ctx, smtp_sink: SmtpSink) -> None:
    smtp_sink.stop()
    with pytest.raises(ToolHandlerError) as caught:
        await send_email(ctx(key="idem_mail_5"), to=TO, subject=SUBJECT, body=BODY)
    assert caught.value.code == "email_unavailable"
    assert caught.value.retryable


async def test_a_header_that_cannot_be_built_is_refused_and_recorded_as_failed(
    ctx: Ctx, smtp_sink: SmtpSink, demo_path: Path
) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        await send_email(ctx(key="idem_mail_6"), to=TO, subject="Hi\r\nBcc: x@evil.com", body=BODY)
    assert caught.value.code == "email_invalid" and not caught.value.retryable
    assert smtp_sink.received() == []
    assert count(demo_path, "emails WHERE status = 'failed'") == 1
    assert count(demo_path, "emails WHERE status = 'sending'") == 0
