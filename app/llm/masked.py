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
from dataclasses import replace

from app.llm.gateway import (
    ChatModel,
    ModelRequest,
    StreamEnd,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    close_stream,
)
from app.llm.pseudonyms import MaskingPolicy, Pseudonyms


class MaskedModel:
    def __init__(self, model: ChatModel, policy: MaskingPolicy) -> None:
        self.model = model
        self.policy = policy

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        mode = self.policy.mode_for(request.metadata.get("tenant_id"))
        table: Pseudonyms | None = None
        sent = request
        if mode != "off":
            table = Pseudonyms.for_session(
                mode, self.policy.kinds, request.metadata.get("session_id")
            )
            sent = replace(request, messages=table.hide_messages(request.messages))
        source = self.model.stream(sent)
        try:
            # Only tokens come back (masks are for good); none issued, nothing to read back.
            answer = _revealed(source, table) if table is not None and table.issued else source
            async for item in answer:
                yield item
        finally:
            await close_stream(source)

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
