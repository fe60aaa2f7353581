"""Server-Sent Events framing for session events.

Frames carry `id: <per-session seq>`, `event: <type>` and a JSON `data` object, so a browser
`EventSource` reconnects with `Last-Event-ID` and resumes exactly after the last event it saw.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi.sse import EventSourceResponse, format_sse_event

from app.observability import metrics
from app.storage.records import Event

KEEPALIVE = b": keep-alive\n\n"
RETRY_MS = 2000
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def encode(event: Event) -> bytes:
    return format_sse_event(
        data_str=json.dumps(event.data, ensure_ascii=False, separators=(",", ":")),
        event=event.type,
        id=str(event.seq),
    )


async def frames(events: AsyncIterator[Event | None]) -> AsyncIterator[bytes]:
    metrics.SSE_STREAMS.inc()
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        async for event in events:
            yield KEEPALIVE if event is None else encode(event)
    finally:
        metrics.SSE_STREAMS.dec()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def stream_response(events: AsyncIterator[Event | None]) -> EventSourceResponse:
    return EventSourceResponse(frames(events), headers=HEADERS)


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and "text/event-stream" in (accept or "").lower()
