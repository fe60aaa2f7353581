"""Server-sent events read from a byte stream, as the WHATWG rules say (the parts a model
server uses): `data:` lines joined by newlines, an event ends at a blank line, comments and
other fields are skipped, an unfinished event at the end of the stream is dropped."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable


async def event_data(lines: AsyncIterable[bytes]) -> AsyncGenerator[str, None]:
    """The `data` of each event, in order."""
    data: list[str] = []
    async for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
