"""Sending email over SMTP (stdlib `smtplib` in a worker thread, with a timeout).

`Mailer` is the seam: `SmtpMailer` talks to a real server; `app.demo.testing` has a local
SMTP sink for tests and demos.
"""

from __future__ import annotations

import asyncio
import smtplib
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from typing import Protocol

from app.errors import InternalError
from app.settings import DemoSettings


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    sender: str
    timeout_s: float

    @classmethod
    def from_settings(cls, settings: DemoSettings) -> SmtpConfig:
        return cls(
            settings.smtp_host, settings.smtp_port, settings.smtp_from, settings.smtp_timeout_s
        )


class MailDeliveryError(InternalError):
    """The server did not take the message. `permanent` when retrying cannot help (5xx)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class Mailer(Protocol):
    @property
    def sender(self) -> str: ...

    async def send(self, message: EmailMessage) -> None: ...


def message_id_for(idempotency_key: str, sender: str) -> str:
    """Stable per idempotency key, so a re-sent copy can be recognised as the same message."""
    domain = sender.rpartition("@")[2] or "hermes.local"
    return f"<{idempotency_key}@{domain}>"


class MailComposeError(InternalError):
    """These fields make no valid message (a line break in a header, text that won't encode).
    Permanent: the same fields fail again."""


def compose(*, message_id: str, sender: str, to: str, subject: str, body: str) -> EmailMessage:
    """The message, checked to serialise, or `MailComposeError` saying why it can't be built."""
    try:
        message = EmailMessage()
        message["Message-ID"] = message_id
        message["From"] = sender
        message["To"] = to
        message["Subject"] = subject
        message["Date"] = formatdate(localtime=True)
        message.set_content(body)
        message.as_bytes()  # fail here, not halfway through the SMTP conversation
    except (ValueError, TypeError) as exc:  # UnicodeError is a ValueError
        raise MailComposeError(f"the message cannot be built: {exc}") from exc
    return message


class SmtpMailer:
    def __init__(self, config: SmtpConfig) -> None:
        self.config = config

    @property
    def sender(self) -> str:
        return self.config.sender

    async def send(self, message: EmailMessage) -> None:
        # smtplib blocks; the thread keeps the event loop free and the timeout bounds each
        # socket operation, so a dead server cannot hold the thread for long.
        await asyncio.to_thread(self._send, message)

    def _send(self, message: EmailMessage) -> None:
        cfg = self.config
        try:
            with smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout_s) as smtp:
                smtp.send_message(message)
        except smtplib.SMTPResponseException as exc:
            raise MailDeliveryError(
                f"SMTP server answered {exc.smtp_code}", permanent=exc.smtp_code >= 500
            ) from exc
        except smtplib.SMTPRecipientsRefused as exc:
            raise MailDeliveryError("the recipient was refused", permanent=True) from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise MailDeliveryError(
                f"cannot reach the mail server {cfg.host}:{cfg.port} ({type(exc).__name__})",
                permanent=False,
            ) from exc
