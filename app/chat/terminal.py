"""The conversation loop of `hermes chat`: read a line, stream the turn it starts, repeat.

A reply streams as it arrives; tool calls, approvals and handoff events show as bracketed
lines. Ctrl-C during a turn asks the service to cancel it (`POST /v1/sessions/{id}/cancel`) and
then reads the session's log from the last event shown to the turn's end, so the terminal shows
how it really ended. Ctrl-C or Ctrl-D at the prompt leaves.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TextIO

import httpx

from app.chat.client import Answer, Frame, HermesClient
from app.events import EventType

PROMPT = "you> "
HELP = """\
  /handoff [reason]            ask for a person (POST /v1/sessions/{id}/handoff)
  /approve ID [reason]         approve a tool call waiting for an operator (operator key)
  /reject ID [reason]          reject it
  /quit                        leave (Ctrl-D too)
  Ctrl-C while a reply streams cancels the turn; at the prompt it leaves."""

Read = Callable[[str], str]


class Chat:
    def __init__(self, client: HermesClient, session_id: str, out: TextIO, read: Read) -> None:
        self.client = client
        self.session_id = session_id
        self.out = out
        self.read = read
        self.last_seq = 0  # the last event shown: where a cancelled turn is followed from
        self._open_line = False  # streamed text not yet ended by a newline
        self._streamed = ""  # the current message's text shown so far, from its deltas

    # -- output ---------------------------------------------------------------------------------

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def line(self, text: str) -> None:
        if self._open_line:
            self.write("\n")
            self._open_line = False
        self.write(text + "\n")

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        self.line(f"session {self.session_id}; /help for commands")
        while True:
            try:
                text = self.read(PROMPT).strip()
            except (EOFError, KeyboardInterrupt):
                self.line("")
                return 0
            if not text:
                continue
            if text.startswith("/"):
                if not self.command(text):
                    return 0
                continue
            self.turn(text)

    def command(self, text: str) -> bool:
        """Run a /command; False: leave."""
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        match name:
            case "/quit" | "/exit":
                return False
            case "/help":
                self.line(HELP)
            case "/handoff":
                answer = self.client.handoff(self.session_id, rest)
                if answer.ok:
                    self.line(f"[handoff requested] {_brief(answer.body)}")
                else:
                    self.line(f"[handoff failed] {answer.error}")
            case "/approve" | "/reject":
                approval_id, _, reason = rest.partition(" ")
                if not approval_id:
                    self.line(f"usage: {name} APPROVAL_ID [reason]")
                else:
                    decision = "approve" if name == "/approve" else "reject"
                    self.decide(approval_id, decision, reason.strip())
            case _:
                self.line(f"unknown command {name}; /help lists them")
        return True

    def decide(self, approval_id: str, decision: str, reason: str = "") -> None:
        answer = self.client.decide(self.session_id, approval_id, decision, reason)
        if answer.ok:
            self.line(f"[approval {approval_id}] {answer.body.get('status', decision)}")
        else:
            self.line(f"[approval {approval_id} not decided] {answer.error}")

    def turn(self, text: str) -> None:
        turn_id: str | None = None
        try:
            with contextlib.closing(self.client.say(self.session_id, text)) as items:
                for item in items:
                    if isinstance(item, Answer):
                        self.line(f"[not sent] {item.error}")
                        return
                    turn_id = turn_id or item.data.get("turn_id")
                    if self.show(item):
                        return
            self.line("[the stream ended before the turn did]")
        except KeyboardInterrupt:
            self.cancel(turn_id)
        except httpx.HTTPError as exc:
            self.line(f"[connection lost: {type(exc).__name__}]")

    def cancel(self, turn_id: str | None) -> None:
        self.line("[cancelling the turn]")
        answer = self.client.cancel(self.session_id)
        if not answer.ok:
            self.line(f"[not cancelled] {answer.error}")
        try:
            with contextlib.closing(self.client.follow(self.session_id, self.last_seq)) as frames:
                for frame in frames:
                    mine = turn_id is None or frame.data.get("turn_id") == turn_id
                    if mine and self.show(frame):
                        return
        except KeyboardInterrupt:
            self.line("[stopped following the turn]")

    # -- events ---------------------------------------------------------------------------------

    def show(self, frame: Frame) -> bool:
        """Print one event; True when it ends the turn."""
        if frame.seq is not None:
            self.last_seq = max(self.last_seq, frame.seq)
        data = frame.data
        match frame.event:
            case EventType.MESSAGE_DELTA:
                text = str(data.get("text", ""))
                if not text:  # emptied by an older Hermes: message.completed has it all
                    return False
                if not self._open_line:
                    self.write("hermes> ")
                    self._open_line = True
                self._streamed += text
                self.write(text)
            case EventType.MESSAGE_COMPLETED:
                author = data.get("author")
                text = str(data.get("text", ""))
                if author and author != "assistant":
                    self.line(f"{author}> {text}")
                elif not self._streamed:
                    self.line(f"hermes> {text}")
                elif text.startswith(self._streamed) and self._open_line:
                    self.write(text[len(self._streamed) :])  # the rest was not streamed here
                elif text != self._streamed:
                    self.line(f"hermes> {text}")
                self._streamed = ""
            case EventType.TURN_QUEUED:
                self.line(f"[queued behind {data.get('ahead', '?')} turn(s)]")
            case EventType.TOOL_STARTED:
                self.line(f"[tool] {data.get('tool')} ...")
            case EventType.TOOL_COMPLETED:
                code = ((data.get("result") or {}).get("error") or {}).get("code")
                status = f"{data.get('status')} ({code})" if code else str(data.get("status"))
                self.line(f"[tool] {data.get('tool')}: {status}")
            case EventType.APPROVAL_REQUESTED:
                self.approval(data)
            case EventType.APPROVAL_RESOLVED:
                self.line(f"[approval] {data.get('tool')}: {data.get('status')}")
            case EventType.TURN_COMPLETED:
                if self._open_line:
                    self.line("")
                return True
            case EventType.TURN_FAILED:
                if data.get("code") == "cancelled":
                    self.line("[turn cancelled]")
                else:
                    self.line(f"[turn failed] {data.get('code')}: {data.get('message')}")
                return True
            case event if event.startswith("handoff.") or event.startswith("session."):
                self.line(f"[{event}] {_brief(data)}")
        return False

    def approval(self, data: dict[str, object]) -> None:
        approval_id = str(data.get("approval_id"))
        arguments = json.dumps(data.get("arguments"), ensure_ascii=False)
        self.line(
            f"[approval needed] {data.get('tool')} {arguments}: {data.get('reason')}"
            f" (id {approval_id})"
        )
        answer = self.read("decide now? a = approve, r = reject, Enter = wait: ").strip().lower()
        if answer in ("a", "approve"):
            self.decide(approval_id, "approve")
        elif answer in ("r", "reject"):
            self.decide(approval_id, "reject")
        else:
            self.line("[waiting for an operator]")


def _brief(data: dict[str, object]) -> str:
    shown = {k: v for k, v in data.items() if k not in ("turn_id", "session_id") and v is not None}
    return json.dumps(shown, ensure_ascii=False)[:300]
