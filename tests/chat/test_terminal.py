"""`hermes chat` in a pseudo-terminal against the live service: a reply streams, tool calls and
an approval show (and the approval is decided from the terminal), `/handoff` answers, and a
Ctrl-C typed while a reply streams cancels the turn in the service (`turn.failed`, code
`cancelled`) and the session goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.demo.fixtures import LI_LEI
from app.demo.testing import SmtpSink
from app.llm.testing import FakeLLMServer, Gate, Reply, ToolCall, ToolCalls
from app.testing import LiveService, read_events, serve

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "acme-operator-key-1"
# The client as a terminal runs it: its own session, the pseudo-terminal as its controlling
# terminal (opened by name after setsid), so a typed Ctrl-C is a SIGINT from the line discipline.
CHILD = (
    "import os, sys; os.close(os.open(os.ttyname(0), os.O_RDWR));"
    " from app.cli import main; sys.exit(main(sys.argv[1:]))"
)


class Terminal:
    """The client's side of a pseudo-terminal: type into it, wait for what it prints."""

    def __init__(self, *args: str) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, "chat", *args],
            cwd=ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("HERMES_")},
        )
        os.close(slave)
        self.screen = ""
        self._seen = 0  # `expect` looks only at what came after its last match

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def _read(self, timeout_s: float) -> str:
        ready, _, _ = select.select([self.master], [], [], timeout_s)
        if not ready:
            return ""
        try:
            return os.read(self.master, 4096).decode(errors="replace")
        except OSError:  # the client exited and the terminal closed
            return ""

    async def expect(self, pattern: str, timeout_s: float = 20) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = re.compile(pattern).search(self.screen, self._seen)
            if found:
                self._seen = found.end()
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} on the terminal:\n{self.screen}")
            self.screen += (await asyncio.to_thread(self._read, 0.1)).replace("\r\n", "\n")

    async def exit_code(self, timeout_s: float = 20) -> int:
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.screen += await asyncio.to_thread(self._read, 0.1)
        try:
            return self.proc.wait(1)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the client did not exit:\n{self.screen}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        os.close(self.master)


@contextlib.contextmanager
def terminal(*args: str) -> Iterator[Terminal]:
    term = Terminal(*args)
    try:
        yield term
    finally:
        term.close()


async def cancelled_in_log(svc: LiveService, session_id: str) -> list[str]:
    """The codes of the session's `turn.failed` events, read back over SSE."""
    last = (await svc.client.get(f"/v1/sessions/{session_id}")).json()["last_event_seq"]
    codes = []
    async with svc.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
    ) as response:
        async for event in read_events(response):
            if event.event == "turn.failed":
                codes.append(event.data["code"])
            if event.id == str(last):
                break
    return codes


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    async with serve(make_settings(delta_flush_ms=0)) as service:
        yield service


async def test_a_reply_streams_tools_show_handoff_answers_and_ctrl_c_cancels_the_turn(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    gate = Gate(after=1)
    fake_llm.enqueue(
        ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"})),
        Reply("It is Sunday today.", chunks=4),
        Reply("Once upon a time, and then it went on and on", chunks=2, gate=gate),
        Reply("Still here."),
    )
    try:
        with terminal("--url", svc.base_url, "--user", "u1") as term:
            session_id = (await term.expect(r"session (ses_\S+);")).group(1)
            await term.expect("you> ")
            term.type("what day is it?\n")
            await term.expect(r"\[tool\] get_current_time \.\.\.")
            await term.expect(r"\[tool\] get_current_time: success")
            await term.expect(r"hermes> It is Sunday today\.\n")

            # No handoff route on this service (or one): either way the terminal says so.
            term.type("/handoff I want a person\n")
            await term.expect(r"\[handoff (requested|failed)\]")

            term.type("tell me a long story\n")
            await term.expect("hermes> Once upon a time")  # the model is held mid-reply
            term.type("\x03")  # Ctrl-C, through the terminal's line discipline
            await term.expect(r"\[cancelling the turn\]")
            await term.expect(r"\[turn cancelled\]")
            assert await cancelled_in_log(svc, session_id) == ["cancelled"]

            term.type("are you there?\n")
            await term.expect(r"hermes> Still here\.")
            term.type("/quit\n")
            assert await term.exit_code() == 0
    finally:
        gate.open()


async def test_an_approval_shows_and_is_decided_from_the_terminal(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    with SmtpSink() as sink:
        settings = make_settings(
            smtp_host=sink.host,
            smtp_port=sink.port,
            auth="api_key",
            api_keys=[f"acme:operator:{OPERATOR}"],
            demo_tenants=["acme"],
        )
        arguments = {"to": "someone.else@example.com", "subject": "Hi", "body": "Hello"}
        fake_llm.enqueue(ToolCalls(ToolCall("send_email", arguments)), Reply("Sent."))
        async with serve(settings) as service:
            args = ("--url", service.base_url, "--api-key", OPERATOR, "--user", LI_LEI)
            with terminal(*args) as term:
                await term.expect("you> ")
                term.type("email my friend\n")
                await term.expect(r"\[approval needed\] send_email \{.*\"subject\": \"Hi\"")
                await term.expect("decide now\\?")
                term.type("a\n")
                await term.expect(r"\[approval \S+\] approved")
                await term.expect(r"\[tool\] send_email: success")
                await term.expect(r"hermes> Sent\.")
                await term.expect("you> ")
                term.type("\x04")  # Ctrl-D at the prompt leaves
                assert await term.exit_code() == 0


async def test_an_unreachable_service_is_one_line_and_exit_2() -> None:
    with terminal("--url", "http://127.0.0.1:9") as term:
        await term.expect("hermes chat: cannot reach http://127.0.0.1:9: ConnectError")
        assert await term.exit_code() == 2


def _shown(*frames: tuple[str, dict[str, Any]]) -> str:
    from io import StringIO

    from app.chat.client import Frame
    from app.chat.terminal import Chat

    out = StringIO()
    chat = Chat(None, "ses_x", out, input)  # type: ignore[arg-type]  # show() needs no client
    for seq, (event, data) in enumerate(frames, 1):
        chat.show(Frame(seq, event, data))
    return out.getvalue()


def test_a_finished_turn_replayed_shows_its_reply_once() -> None:
    done = ("message.completed", {"text": "one two three"})
    # live: the deltas stream the text, message.completed adds nothing
    assert _shown(
        ("message.delta", {"text": "one "}), ("message.delta", {"text": "two three"}), done
    ) == ("hermes> one two three")
    # replayed after the end: no deltas (an older Hermes kept them empty), the reply comes
    # from message.completed
    assert _shown(done) == "hermes> one two three\n"
    assert _shown(("message.delta", {"text": ""}), ("message.delta", {"text": ""}), done) == (
        "hermes> one two three\n"
    )
    # reconnected mid-reply: the first delta was live, the rest comes from message.completed
    assert _shown(("message.delta", {"text": "one "}), ("message.delta", {"text": ""}), done) == (
        "hermes> one two three"
    )
