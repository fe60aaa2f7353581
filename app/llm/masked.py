"""A remote model behind the tenant's masking policy (`app.llm.pseudonyms`).

Only models that run outside Hermes are wrapped (`app.llm.build`); `hermes/local` answers
in-process and sees the text as it is. The tenant and the session come from the request's
metadata (`tenant_id`, `session_id`); a request without a tenant gets the default mode.

Under `pseudonymise` the answer is read back before anything else sees it: text deltas as they
stream (holding only a possible token's start), tool-call arguments whole at the end of the
answer (names and ids pass at once), so the turn loop, the tools, the events and the stored
messages see real values and never a token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.llm.gateway import ChatModel, ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta
from app.llm.pseudonyms import MaskingPolicy, Pseudonyms


class MaskedModel:
    def __init__(self, model: ChatModel, policy: MaskingPolicy) -> None:
        self.model = model
        self.policy = policy

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        mode = self.policy.mode_for(request.metadata.get("tenant_id"))
        if mode == "off":
            source = self.model.stream(request)
            try:
                async for item in source:
                    yield item
            finally:
                await _close(source)
            return
        table = Pseudonyms.for_session(mode, self.policy.kinds, request.metadata.get("session_id"))
        sent = ModelRequest(
            messages=table.hide_messages(request.messages),
            tools=request.tools,
            phase=request.phase,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            metadata=request.metadata,
        )
        source = self.model.stream(sent)
        try:
            passed = source if mode == "mask" or table.issued == 0 else _revealed(source, table)
            async for item in passed:
                yield item
        finally:
            await _close(source)

    async def aclose(self) -> None:
        await self.model.aclose()


async def _revealed(
    source: AsyncIterator[StreamItem], table: Pseudonyms
) -> AsyncIterator[StreamItem]:
    text = table.revealer()
    arguments: dict[int, list[str]] = {}

    def held() -> list[StreamItem]:
        out: list[StreamItem] = []
        rest = text.flush()
        if rest:
            out.append(TextDelta(rest))
        for index, parts in arguments.items():
            out.append(ToolCallDelta(index, arguments=table.reveal_arguments("".join(parts))))
        arguments.clear()
        return out

    async for item in source:
        match item:
            case TextDelta(text=piece):
                shown = text.feed(piece)
                if shown:
                    yield TextDelta(shown)
            case ToolCallDelta(index=index, id=call_id, name=name, arguments=args):
                arguments.setdefault(index, []).append(args)
                if call_id or name:
                    yield ToolCallDelta(index, call_id, name)
            case StreamEnd():
                for done in held():
                    yield done
                yield item
                return
    for done in held():
        yield done


async def _close(source: AsyncIterator[StreamItem]) -> None:
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()
