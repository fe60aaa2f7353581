"""The few API calls the terminal client makes, and its reading of Server-Sent Events.

Blocking on purpose: the terminal waits for one thing at a time, and a Ctrl-C lands in the
read it interrupts as `KeyboardInterrupt`.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from app.llm.sse import SseParser


@dataclass(frozen=True)
class Frame:
    """One SSE event: its sequence id, type and JSON payload."""

    seq: int | None
    event: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """A JSON answer: 2xx or the service's one error shape."""

    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> str:
        """`code: message` of an error answer."""
        error = self.body.get("error") or {}
        return f"{error.get('code', self.status)}: {error.get('message', '')}".rstrip(": ")


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    """Events from SSE lines (comments and keep-alives skipped)."""
    parser = SseParser()
    for line in lines:
        event = parser.line(line)
        if event is not None:
            payload = json.loads(event.data)
            seq = int(event.id) if event.id is not None and event.id.isdigit() else None
            yield Frame(seq, event.event, payload if isinstance(payload, dict) else {})


class HermesClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 30) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        # No read timeout on streams: a turn may wait minutes for an approval (keep-alives).
        timeout = httpx.Timeout(timeout_s, read=None)
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _answer(self, response: httpx.Response) -> Answer:
        try:
            body = response.json()
        except ValueError:
            body = {"error": {"code": f"http_{response.status_code}", "message": response.text}}
        return Answer(response.status_code, body if isinstance(body, dict) else {})

    def create_session(self, user_id: str) -> Answer:
        return self._answer(self.http.post("/v1/sessions", json={"user_id": user_id}))

    def get_session(self, session_id: str) -> Answer:
        return self._answer(self.http.get(f"/v1/sessions/{session_id}"))

    def say(self, session_id: str, text: str) -> Generator[Frame | Answer]:
        """The turn's events as they come; an error answer instead when it is refused."""
        with self.http.stream(
            "POST",
            f"/v1/sessions/{session_id}/messages",
            json={"content": text},
            headers={"Accept": "text/event-stream"},
        ) as response:
            if response.status_code != 200:
                response.read()
                yield self._answer(response)
                return
            yield from frames(response.iter_lines())

    def follow(self, session_id: str, after: int) -> Generator[Frame]:
        """The session's events after `after`, then live ones."""
        with self.http.stream(
            "GET", f"/v1/sessions/{session_id}/events", headers={"Last-Event-ID": str(after)}
        ) as response:
            if response.status_code != 200:
                return
            yield from frames(response.iter_lines())

    def cancel(self, session_id: str) -> Answer:
        return self._answer(self.http.post(f"/v1/sessions/{session_id}/cancel"))

    def handoff(self, session_id: str, reason: str) -> Answer:
        body = {"reason": reason} if reason else {}
        return self._answer(self.http.post(f"/v1/sessions/{session_id}/handoff", json=body))

    def decide(self, session_id: str, approval_id: str, decision: str, reason: str = "") -> Answer:
        url = f"/v1/sessions/{session_id}/approvals/{approval_id}"
        body = {"decision": decision, **({"reason": reason} if reason else {})}
        return self._answer(self.http.post(url, json=body))
