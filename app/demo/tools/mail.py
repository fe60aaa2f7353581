"""send_email: deliver one email over SMTP, at most once per idempotency key."""

from __future__ import annotations

from typing import Any

from app.demo.backend import ShopBackend
from app.demo.mail import MailComposeError, MailDeliveryError, message_id_for
from app.demo.outbox import Draft
from app.demo.tools._shared import actor, refusals
from app.errors import ToolHandlerError
from app.tools.context import ToolContext


async def send_email(
    ctx: ToolContext[ShopBackend], to: str, subject: str, body: str
) -> dict[str, Any]:
    smtp = ctx.deps.mailer
    draft = Draft(
        message_id=message_id_for(ctx.idempotency_key, smtp.sender),
        sender=smtp.sender,
        recipient=to,
        subject=subject,
        body=body,
    )
    try:
        with refusals():
            email = await ctx.deps.store.send_email(actor(ctx), draft, smtp)
    except MailComposeError as exc:  # validation should have caught it; the outbox says failed
        raise ToolHandlerError(
            "email_invalid", f"{exc}; fix the recipient, subject or body and try again"
        ) from None
    except MailDeliveryError as exc:
        if exc.permanent:
            raise ToolHandlerError(
                "email_rejected", f"the mail server refused the message: {exc}"
            ) from None
        raise ToolHandlerError(
            "email_unavailable",
            f"the email was not sent: {exc}; it can be retried later",
            retryable=True,
        ) from None
    return {"message_id": email.message_id, "status": "sent"}
