"""`ChatModel` for one model through `litellm.acompletion`: the providers the direct
OpenAI-compatible client (`app.llm.openai_compat`) doesn't serve, or all with
`HERMES_MODEL_API=litellm`.

One call, one try: retries, fallbacks, timeouts and breakers are the chain's job
(`app.llm.chain`), the same for every transport, so LiteLLM's own retries are off and its
Router (whose cooldowns locked out a model after one refused key) is not used. LiteLLM's
exceptions become `ModelFailure`s here, by kind and HTTP status, with a masked detail.

`import litellm` is slow (seconds) and, unless told otherwise, downloads a price map; it is
imported once, when the first model that needs it is built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from app.llm.catalog import ModelConfig
from app.llm.failures import ModelFailure, code_for_status, parse_retry_after
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta

__all__ = ["LiteLLMModel", "ModelConfig", "import_litellm"]


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # providers that don't take a parameter get the call without it
    # LiteLLM logs provider errors verbatim (keys, hosts); Hermes logs them masked instead.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return litellm


class LiteLLMModel:
    def __init__(self, config: ModelConfig, *, timeout_s: float) -> None:
        self._litellm = import_litellm()
        self.config = config
        self._params: dict[str, Any] = {
            "model": config.model,
            "timeout": timeout_s,
            "stream_timeout": timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            **config.extra,
        }
        if config.api_base:
            self._params["api_base"] = config.api_base
        if config.api_key:
            self._params["api_key"] = config.api_key

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        kwargs: dict[str, Any] = {**self._params, **request.chat_params()}
        try:
            response = await self._litellm.acompletion(**kwargs)
        except Exception as exc:
            raise self._failure(exc) from None

        reported: str | None = None
        finish: str | None = None
        prompt_tokens = completion_tokens = 0
        try:
            async for chunk in response:
                reported = getattr(chunk, "model", None) or reported
                usage = getattr(chunk, "usage", None)
                if usage:
                    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
                    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                finish = choice.finish_reason or finish
                delta = choice.delta
                if delta is None:
                    continue
                if delta.content:
                    yield TextDelta(delta.content)
                for call in delta.tool_calls or ():
                    fn = call.function
                    yield ToolCallDelta(
                        index=call.index or 0,
                        id=call.id,
                        name=fn.name if fn else None,
                        arguments=(fn.arguments or "") if fn else "",
                    )
        except Exception as exc:
            raise self._failure(exc, default="llm_stream_interrupted") from None
        yield StreamEnd(finish, reported, prompt_tokens, completion_tokens)

    async def aclose(self) -> None:
        # LiteLLM keeps its HTTP clients in a module-level cache; nothing to close here.
        return None

    def _failure(self, exc: BaseException, default: str = "llm_unavailable") -> ModelFailure:
        code, status = _classify(exc, self._litellm, default)
        return ModelFailure(
            code,
            self.config.model,
            status=status,
            detail=str(exc),
            retry_after=_retry_after(exc),
        )


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _classify(exc: BaseException, litellm: Any, default: str) -> tuple[str, int | None]:
    """(code, HTTP status) of a LiteLLM exception. LiteLLM reports a refused connection and a
    missing key as a 500, so the causes are read before the status."""
    causes = _chain(exc)
    if any(isinstance(e, litellm.Timeout | TimeoutError) for e in causes):
        return "llm_timeout", None
    if any(isinstance(e, ConnectionError | OSError) for e in causes) or any(
        type(e).__name__ in ("APIConnectionError", "ConnectError") for e in causes
    ):
        return "llm_unreachable", None
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = str(exc).lower()
    if "missing credentials" in text or ("api_key" in text and "must be set" in text):
        return "llm_no_api_key", None
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "llm_context_too_long", status
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return "llm_auth_failed", status
    if isinstance(exc, litellm.RateLimitError):
        return "llm_rate_limited", status
    if isinstance(exc, litellm.NotFoundError):
        return "llm_model_not_found", status
    if isinstance(exc, litellm.BadRequestError):
        return "llm_bad_request", status
    if status is not None and status >= 400:
        return code_for_status(status), status
    return default, status


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    return parse_retry_after(headers)
