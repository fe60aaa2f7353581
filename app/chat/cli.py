"""`hermes chat`: talk to a running Hermes from a terminal."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

DEFAULT_URL = "http://127.0.0.1:8000"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = sub.add_parser(
        "chat",
        help="chat with a running Hermes: streamed replies, tools, approvals, /handoff, Ctrl-C"
        " cancels the turn",
    )
    chat.add_argument(
        "--url", default=os.environ.get("HERMES_CHAT_URL", DEFAULT_URL), help="the service"
    )
    chat.add_argument(
        "--api-key",
        default=os.environ.get("HERMES_CHAT_API_KEY"),
        help="an API key when the service has HERMES_AUTH=api_key (or HERMES_CHAT_API_KEY)",
    )
    chat.add_argument("--user", default="cust_0001", help="the customer a new session is for")
    chat.add_argument("--session", help="continue this session instead of starting one")
    chat.set_defaults(func=_chat)


def _chat(args: argparse.Namespace) -> int:
    import httpx

    from app.chat.client import HermesClient
    from app.chat.terminal import Chat

    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  # line editing and history for input()

    client = HermesClient(args.url, args.api_key)
    try:
        try:
            if args.session:
                answer = client.get_session(args.session)
            else:
                answer = client.create_session(args.user)
        except httpx.HTTPError as exc:
            print(f"hermes chat: cannot reach {args.url}: {type(exc).__name__}", file=sys.stderr)
            return 2
        if not answer.ok:
            print(f"hermes chat: {answer.error}", file=sys.stderr)
            return 2
        return Chat(client, str(answer.body["id"]), sys.stdout, input).run()
    finally:
        client.close()
