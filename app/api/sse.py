"""Server-Sent Events framing for session events.

Frames carry `id: <per-session seq>`, `event: <type>` and a JSON `data` object, so a browser
`EventSource` reconnects with `Last-Event-ID` and resumes exactly after the last event it saw.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from fastapi.sse import EventSourceResponse, format_sse_event

from app.errors import TooManyStreams
from app.observability import metrics
from app.principal import Principal
from app.resilience.concurrency import KeyedCounter
from app.storage.records import Event

KEEPALIVE = b": keep-alive\n\n"
RETRY_MS = 2000
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# A refused stream is told to retry after this long: streams end when their clients leave.
STREAM_RETRY_AFTER_S = 5
Release = Callable[[], None]
T = TypeVar("T")


def encode(event: Event) -> bytes:
    return format_sse_event(
        data_str=json.dumps(event.data, ensure_ascii=False, separators=(",", ":")),
        event=event.type,
        id=str(event.seq),
    )


def take_slot(streams: KeyedCounter, principal: Principal) -> Release:
    """One of the principal's open streams (`HERMES_MAX_STREAMS_PER_PRINCIPAL`), taken before
    anything starts: 429 `too_many_streams` when all are held. The release runs once."""
    key = f"{principal.tenant_id}:{principal.subject}"
    if not streams.try_take(key):
        metrics.BUDGET_REFUSALS.labels(kind="streams").inc()
        raise TooManyStreams(
            "too many event streams are open for this key; close one first",
            limit=streams.limit,
            retry_after_s=STREAM_RETRY_AFTER_S,
        )
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            streams.give_back(key)

    return release


async def with_slot(
    streams: KeyedCounter, principal: Principal, streamed: bool, start: Coroutine[Any, Any, T]
) -> tuple[T, Release | None]:
    """Take a stream slot (when `streamed`) before `start` runs, so a refused stream starts
    nothing; give it back if `start` fails. The release goes to `stream_response`."""
    try:
        release = take_slot(streams, principal) if streamed else None
    except TooManyStreams:
        start.close()  # never run
        raise
    try:
        return await start, release
    except BaseException:
        if release is not None:
            release()
        raise


async def frames(
    events: AsyncIterator[Event | None], release: Release | None = None
) -> AsyncIterator[bytes]:
    metrics.SSE_STREAMS.inc()
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        async for event in events:
            yield KEEPALIVE if event is None else encode(event)
    finally:
        metrics.SSE_STREAMS.dec()
        if release is not None:
            release()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def stream_response(
    events: AsyncIterator[Event | None], release: Release | None = None
) -> EventSourceResponse:
    return EventSourceResponse(frames(events, release), headers=HEADERS)


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and "text/event-stream" in (accept or "").lower()
