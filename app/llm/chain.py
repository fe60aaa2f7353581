"""One `ChatModel` over several: the primary, its fallbacks in order, `hermes/local` last.

Each model gets its own tries (with backoff, never on auth or the request's own faults), a
timeout for every wait on it, and a circuit breaker: after repeated failures of the kind that
say "this model is unusable now" (unreachable, refused credentials, server errors, timeouts)
the breaker opens and later calls skip the model at once, until one probe after the open
period finds it healthy again. The last model has no breaker: with nowhere else to go, every
call tries it. Breaker state lives where the `breakers` factory keeps it: in this process, or
in Redis, shared by every Hermes process (`HERMES_REDIS_URL`).

A call falls over to the next model only before anything of the answer has been passed on;
once it has, a failure is `llm_stream_interrupted`. What reaches the caller and the log is a
code and a masked message, never the provider's own text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, replace

from app.errors import InternalError
from app.llm.failures import ModelFailure, ModelsFailed, as_failure
from app.llm.gateway import (
    Attempt,
    ChatModel,
    ModelRequest,
    ModelRoute,
    StreamEnd,
    StreamItem,
    close_stream,
)
from app.llm.masking import Redact
from app.llm.retry import RetryPolicy
from app.resilience.breaker import (
    Breaker,
    BreakerFactory,
    BreakerPolicy,
    BreakerState,
    local_breakers,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainLink:
    name: str  # the configured model string, e.g. openai/gpt-4o-mini or hermes/local
    model: ChatModel


@dataclass
class _Link:
    name: str
    model: ChatModel
    breaker: Breaker | None


@dataclass(frozen=True)
class _Started:
    source: AsyncIterator[StreamItem]
    first: StreamItem | None
    tries: int


class _Skipped(InternalError):
    """The model's breaker is open: no try was made."""


@dataclass(frozen=True)
class _Failed:
    failure: ModelFailure | None  # None: skipped, its breaker is open
    tries: int


def _unchanged(text: str) -> str:
    return text


class ModelChain:
    def __init__(
        self,
        links: list[ChainLink],
        *,
        retry: RetryPolicy,
        breaker: BreakerPolicy,
        timeout_s: float,
        redact: Redact | None = None,
        breakers: BreakerFactory | None = None,
    ) -> None:
        if not links:
            raise ValueError("a model chain needs at least one model")
        self._retry = retry
        self._tries = self._retry.caller()
        self._timeout_s = timeout_s
        self._redact = redact or _unchanged
        make = breakers or local_breakers()
        self._links = [
            _Link(
                link.name,
                link.model,
                None
                if i == len(links) - 1
                else make(f"model:{link.name}", link.name, breaker, self._breaker_changed),
            )
            for i, link in enumerate(links)
        ]

    @property
    def models(self) -> list[str]:
        return [link.name for link in self._links]

    async def breaker_states(self) -> dict[str, str]:
        return {
            link.name: (await link.breaker.inspect()).state.value
            for link in self._links
            if link.breaker
        }

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        attempts: list[Attempt] = []
        last: ModelFailure | None = None
        for index, link in enumerate(self._links):
            outcome = await self._start(link, request)
            if isinstance(outcome, _Started):
                attempts.append(Attempt(link.name, "answered", outcome.tries))
                route = ModelRoute(link.name, tuple(attempts))
                async with contextlib.aclosing(self._rest(link, outcome, route)) as rest:
                    async for item in rest:
                        yield item
                return
            failure = outcome.failure
            attempts.append(
                Attempt(link.name, failure.code if failure else "skipped", outcome.tries)
            )
            if failure is None:
                log.debug("model %s skipped: its breaker is open", link.name)
                continue
            last = failure
            if index + 1 < len(self._links):
                log.warning(
                    "model %s failed after %d tries, trying %s: %s",
                    link.name,
                    outcome.tries,
                    self._links[index + 1].name,
                    self._redact(failure.message),
                )
        code = last.code if last else "llm_unavailable"
        message = self._redact(last.message if last else "no model is available")
        log.warning("model call failed: %s: %s", code, message)
        raise ModelsFailed(code, message, ModelRoute(None, tuple(attempts)))

    async def aclose(self) -> None:
        seen: set[int] = set()
        for link in self._links:
            if id(link.model) not in seen:
                seen.add(id(link.model))
                await link.model.aclose()

    # -- internals ------------------------------------------------------------------------------

    async def _next(self, source: AsyncIterator[StreamItem], name: str) -> StreamItem | None:
        """The next item, or None at the end; no answer within the timeout is `llm_timeout`."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await anext(source)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise ModelFailure(
                "llm_timeout", name, detail=f"no answer within {self._timeout_s:g} s"
            ) from None

    async def _start(self, link: _Link, request: ModelRequest) -> _Started | _Failed:
        """Try `link` until something of an answer arrives, its tries run out, a failure no
        retry can fix, or its breaker opens."""
        tries = 0
        last: ModelFailure | None = None
        opened = False

        async def once() -> _Started:
            nonlocal tries, last, opened
            if link.breaker is not None and not await link.breaker.admit():
                raise _Skipped
            tries += 1
            source = link.model.stream(request)
            try:
                first = await self._next(source, link.name)
            except asyncio.CancelledError:
                await close_stream(source)
                if link.breaker is not None:
                    await link.breaker.release()
                raise
            except Exception as exc:
                await close_stream(source)
                last = as_failure(exc, link.name)
                opened = await self._judge(link, last) is BreakerState.OPEN
                raise last from None
            if link.breaker is not None:
                await link.breaker.succeeded()
            return _Started(source, first, tries)

        def again(exc: BaseException) -> bool | float:
            if opened:
                return False  # it just opened: the next try would be skipped anyway
            return self._retry.backoff(exc)

        try:
            return await self._tries(again, once)
        except (_Skipped, ModelFailure):
            return _Failed(last, tries)

    async def _rest(
        self, link: _Link, started: _Started, route: ModelRoute
    ) -> AsyncGenerator[StreamItem, None]:
        """Pass the answer on; from here a failure can't fall over to another model."""
        source, item, ended = started.source, started.first, False
        try:
            while item is not None:
                if isinstance(item, StreamEnd):
                    ended = True
                    item = replace(item, route=route)
                yield item
                try:
                    item = await self._next(source, link.name)
                except Exception as exc:
                    cause = as_failure(exc, link.name)
                    raise await self._interrupted(link, cause, route) from None
            if not ended:
                yield StreamEnd(route=route)
        finally:
            await close_stream(source)

    async def _interrupted(
        self, link: _Link, cause: ModelFailure, route: ModelRoute
    ) -> ModelsFailed:
        broken = ModelFailure("llm_stream_interrupted", link.name, detail=cause.code)
        await self._judge(link, broken)
        message = self._redact(broken.message)
        log.warning("model call failed: %s: %s", broken.code, message)
        attempts = (*route.attempts[:-1], Attempt(link.name, broken.code, route.attempts[-1].tries))
        return ModelsFailed(broken.code, message, ModelRoute(None, attempts))

    async def _judge(self, link: _Link, failure: ModelFailure) -> BreakerState | None:
        """Tell the model's breaker; the state a failure left it in (None: not a failure)."""
        breaker = link.breaker
        if breaker is None:
            return None
        match failure.verdict:
            case "failure":
                return await breaker.failed(error=failure.code)
            case "timeout":
                return await breaker.failed(timed_out=True, error=failure.code)
            case "healthy":
                await breaker.succeeded()
            case "neutral":
                await breaker.release()
        return None

    def _breaker_changed(self, name: str, state: BreakerState) -> None:
        link = next(link for link in self._links if link.name == name)
        breaker = link.breaker
        assert breaker is not None
        if state is BreakerState.OPEN:
            log.warning(
                "model %s breaker opened after repeated failures (%s); skipping it for %g s",
                name,
                breaker.last_error,
                breaker.policy.open_seconds,
            )
        elif state is BreakerState.CLOSED:
            log.warning("model %s breaker closed: the model answers again", name)
        else:
            log.info("model %s breaker half-open: the next call probes it", name)
