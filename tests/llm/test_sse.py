"""The event reader of the direct model client, by the WHATWG rules a model server relies on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.llm.sse import ServerEvent, SseParser, event_data


async def _lines(*lines: bytes) -> AsyncIterator[bytes]:
    for line in lines:
        yield line


async def _read(*lines: bytes) -> list[str]:
    return [data async for data in event_data(_lines(*lines))]


async def test_events_end_at_blank_lines_and_join_their_data_lines() -> None:
    assert await _read(
        b"data: one\n",
        b"\n",
        b"data:two\r\n",
        b"data:  three\r\n",
        b"\r\n",
        b"data: [DONE]\n",
        b"\n",
    ) == ["one", "two\n three", "[DONE]"]


async def test_comments_and_other_fields_are_skipped() -> None:
    assert await _read(
        b": keep-alive\n", b"event: chunk\n", b"id: 7\n", b"retry: 10\n", b"data: x\n", b"\n"
    ) == ["x"]


async def test_an_unfinished_event_at_the_end_is_dropped() -> None:
    assert await _read(b"data: done\n", b"\n", b"data: cut off") == ["done"]


async def test_blank_lines_alone_are_no_events() -> None:
    assert await _read(b"\n", b"\r\n", b"data: x\n", b"\n", b"\n") == ["x"]


async def test_bytes_that_are_not_utf8_raise() -> None:
    with pytest.raises(UnicodeDecodeError):
        await _read(b"data: \xff\n", b"\n")


def test_the_parser_keeps_the_last_id_reads_names_retry_and_counts_comments() -> None:
    parser = SseParser()
    chunks = [
        "id: 7\nevent: turn.started\nda",
        "ta: {}\n\n: keep-alive\r\ndata: x\r",
        "\rid: a\0b\n\n",
    ]
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    assert events == [ServerEvent("7", "turn.started", "{}"), ServerEvent("7", "message", "x")]
    assert parser.comments == 1
    assert parser.feed("retry: 1500\nretry: soon\n") == [] and parser.retry_ms == 1500


def test_an_event_with_no_data_is_no_event_and_forgets_its_name() -> None:
    parser = SseParser()
    assert [parser.line(x) for x in ("event: ping", "", "data: y", "")] == [
        None,
        None,
        None,
        ServerEvent(None, "message", "y"),
    ]
