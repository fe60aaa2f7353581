"""Test doubles for the demo services: a real SMTP server on 127.0.0.1 that keeps what it
receives (`SmtpSink`, needs the dev extra `aiosmtpd`), and an in-memory `RecordingMailer`."""

from __future__ import annotations

import socket
import threading
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from app.demo.mail import MailDeliveryError, SmtpConfig


class SmtpSink:
    """A real SMTP server on an OS-chosen port of 127.0.0.1.

    `fail_next = n` makes it answer the next n messages with a temporary failure (451).
    """

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.fail_next = 0
        self._lock = threading.Lock()
        self._controller: Any = None
        self.host = "127.0.0.1"
        self.port = 0

    # aiosmtpd handler hook; runs on the server's own thread and loop.
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return "451 Requested action aborted: try again later"
            parsed = message_from_bytes(envelope.content, policy=policy.default)
            assert isinstance(parsed, EmailMessage)
            self.messages.append(parsed)
        return "250 Message accepted for delivery"

    def received(self, message_id: str | None = None) -> list[EmailMessage]:
        with self._lock:
            return [m for m in self.messages if message_id in (None, m["Message-ID"])]

    def config(self, sender: str = "hermes@example.com", timeout_s: float = 5.0) -> SmtpConfig:
        return SmtpConfig(self.host, self.port, sender, timeout_s)

    def start(self) -> SmtpSink:
        from aiosmtpd.controller import Controller

        # Bind first and hand the socket over: no window in which another process could take
        # a port we picked.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]

        class _BoundController(Controller):
            def _create_server(self) -> Any:
                return self.loop.create_server(self._factory_invoker, sock=sock)

        self._controller = _BoundController(self, hostname=self.host, port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> SmtpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RecordingMailer:
    """A `Mailer` that keeps messages in memory; `fail_next` as for `SmtpSink`."""

    def __init__(self, sender: str = "hermes@example.com") -> None:
        self._sender = sender
        self.sent: list[EmailMessage] = []
        self.fail_next = 0

    @property
    def sender(self) -> str:
        return self._sender

    async def send(self, message: EmailMessage) -> None:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise MailDeliveryError("temporary failure (test)", permanent=False)
        self.sent.append(message)
