"""SmtpMailer against a real SMTP server on 127.0.0.1."""

from __future__ import annotations

import pytest

from app.demo.mail import MailDeliveryError, SmtpMailer, compose, message_id_for
from app.demo.testing import SmtpSink


def test_message_id_is_derived_from_the_key() -> None:
    assert message_id_for("idem_abc", "hermes@example.com") == "<idem_abc@example.com>"
    assert message_id_for("idem_abc", "x@example.com") == message_id_for(
        "idem_abc", "y@example.com"
    )
    assert message_id_for("idem_abc", "hermes@example.com") != message_id_for(
        "idem_abd", "hermes@example.com"
    )


async def test_a_chinese_message_arrives_intact() -> None:
    with SmtpSink() as sink:
        mailer = SmtpMailer(sink.config())
        await mailer.send(
            compose(
                message_id="<idem_1@example.com>",
                sender=mailer.sender,
                to="han.meimei@example.com",
                subject="订单确认",
                body="韩梅梅您好，您的订单已付款。",
            )
        )
        [message] = sink.received("<idem_1@example.com>")
    assert message["Subject"] == "订单确认"
    assert "韩梅梅您好" in message.get_content()


async def test_temporary_and_connection_failures_are_not_permanent() -> None:
    message = compose(
        message_id="<idem_2@example.com>", sender="hermes@example.com", to="a@example.com",
        subject="s", body="b",
    )  # fmt: skip
    with SmtpSink() as sink:
        sink.fail_next = 1
        mailer = SmtpMailer(sink.config())
        with pytest.raises(MailDeliveryError) as temporary:
            await mailer.send(message)
        assert temporary.value.permanent is False
        assert sink.received() == []
    with pytest.raises(MailDeliveryError) as unreachable:
        await mailer.send(message)  # the sink is gone: nothing listens on that port
    assert unreachable.value.permanent is False
