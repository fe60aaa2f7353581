"""The LLM test doubles: a gated reply stops after its first pieces until the test opens it."""

from __future__ import annotations

import asyncio
import time

from app.llm.gateway import ModelRequest, TextDelta
from app.llm.testing import Gate, Reply, ScriptedLLM


async def test_a_gated_reply_holds_after_its_first_pieces_until_opened() -> None:
    gate = Gate(after=2)
    model = ScriptedLLM(Reply("a b c d", gate=gate))
    stream = aiter(model.stream(ModelRequest(messages=[{"role": "user", "content": "hi"}])))
    first = [await anext(stream), await anext(stream)]
    assert first == [TextDelta("a "), TextDelta("b ")]

    third = asyncio.ensure_future(anext(stream))
    deadline = time.monotonic() + 10
    while not gate.reached:
        assert time.monotonic() < deadline, "the reply never got to its gate"
        await asyncio.sleep(0.01)
    assert not third.done()  # held: only open() lets it on

    gate.open()
    assert await third == TextDelta("c ")
    assert await anext(stream) == TextDelta("d")


async def test_a_gate_left_closed_lets_the_reply_go_after_its_timeout() -> None:
    model = ScriptedLLM(Reply("a b", gate=Gate(after=1, timeout_s=0)))
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}])
    texts = [d.text async for d in model.stream(request) if isinstance(d, TextDelta)]
    assert texts == ["a ", "b"]
