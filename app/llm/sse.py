"""Server-Sent Events read by the WHATWG EventSource rules: the one parser of Hermes' clients
(the direct model client, the terminal client, the test and benchmark reader).

`data:` lines join by newlines and an event ends at a blank line; `event:` names it (default
`message`); `id:` sets the last event id, which later events keep until another (one holding
NUL is ignored); `retry:` digits set the reconnection delay; a line starting with `:` is a
comment (a keep-alive); an unfinished event at the end of the stream is dropped.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerEvent:
    id: str | None  # the last event id in force when the event ended
    event: str
    data: str


class SseParser:
    """One stream's state: fed whole lines (`line`) or any chunks of text (`feed`)."""

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self.comments = 0
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: str) -> list[ServerEvent]:
        """The events that `chunk` ends (lines end at CR, LF or CRLF; a part line waits)."""
        self._buffer += chunk
        out: list[ServerEvent] = []
        while True:
            ends = [i for i in (self._buffer.find("\n"), self._buffer.find("\r")) if i >= 0]
            if not ends:
                return out
            end = min(ends)
            line = self._buffer[:end]
            skip = 2 if self._buffer[end : end + 2] == "\r\n" else 1
            self._buffer = self._buffer[end + skip :]
            event = self.line(line)
            if event is not None:
                out.append(event)

    def line(self, line: str) -> ServerEvent | None:
        """One line, without its end; the event it ends, if it ends one."""
        if not line:
            if self._id is not None:
                self.last_event_id = self._id
            if not self._data:
                self._event = ""
                return None
            event = ServerEvent(self.last_event_id, self._event or "message", "\n".join(self._data))
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            self.comments += 1
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None


async def event_data(lines: AsyncIterable[bytes]) -> AsyncGenerator[str, None]:
    """The `data` of each event of a byte stream delivered line by line, in order."""
    parser = SseParser()
    async for raw in lines:
        event = parser.line(raw.decode("utf-8").rstrip("\r\n"))
        if event is not None:
            yield event.data
