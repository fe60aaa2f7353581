"""`ChatModel` over a LiteLLM Router: the primary model, fallbacks, retries, timeouts.

`import litellm` is slow (seconds) and, unless told otherwise, downloads a price map; it is
imported once, here, when the service starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from app.errors import UpstreamLLMError
from app.llm.gateway import ModelRequest, StreamEnd, StreamItem, TextDelta, ToolCallDelta

log = logging.getLogger(__name__)

PRIMARY = "hermes-primary"


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # providers that don't take a parameter get the call without it
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return litellm


@dataclass(frozen=True)
class ModelConfig:
    """One model the router may use: a LiteLLM model string and where to reach it."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def build_model_list(
    primary: ModelConfig, fallbacks: list[ModelConfig], timeout_s: float
) -> tuple[list[dict[str, Any]], list[dict[str, list[str]]]]:
    deployments: list[dict[str, Any]] = []
    for name, cfg in [(PRIMARY, primary)] + [
        (f"hermes-fallback-{i}", fb) for i, fb in enumerate(fallbacks)
    ]:
        params: dict[str, Any] = {
            "model": cfg.model,
            "timeout": timeout_s,
            "stream_timeout": timeout_s,
            **cfg.extra,
        }
        if cfg.api_base:
            params["api_base"] = cfg.api_base
        if cfg.api_key:
            params["api_key"] = cfg.api_key
        deployments.append({"model_name": name, "litellm_params": params})
    names = [d["model_name"] for d in deployments[1:]]
    return deployments, ([{PRIMARY: names}] if names else [])


def _error_code(exc: BaseException, litellm: Any) -> str:
    if isinstance(exc, litellm.Timeout):
        return "llm_timeout"
    if isinstance(exc, litellm.RateLimitError):
        return "llm_rate_limited"
    if isinstance(exc, litellm.AuthenticationError):
        return "llm_auth_failed"
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "llm_context_too_long"
    if isinstance(exc, litellm.BadRequestError):
        return "llm_bad_request"
    return "llm_unavailable"


class LiteLLMGateway:
    def __init__(
        self,
        primary: ModelConfig,
        fallbacks: list[ModelConfig] | None = None,
        *,
        timeout_s: float = 60.0,
        retries: int = 2,
    ) -> None:
        self._litellm = import_litellm()
        from litellm import Router

        model_list, fallback_map = build_model_list(primary, fallbacks or [], timeout_s)
        self.models = [d["litellm_params"]["model"] for d in model_list]
        self._router = Router(
            model_list=model_list,
            fallbacks=fallback_map,
            num_retries=retries,
            timeout=timeout_s,
            retry_after=0,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        litellm = self._litellm
        kwargs: dict[str, Any] = {
            "model": PRIMARY,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            kwargs["tools"] = request.tools
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        try:
            response = await self._router.acompletion(**kwargs)
        except Exception as exc:
            code = _error_code(exc, litellm)
            log.warning(
                "model call failed after retries and fallbacks: %s: %s", code, _describe(exc)
            )
            raise UpstreamLLMError(_describe(exc), code=code) from exc

        model: str | None = None
        finish: str | None = None
        prompt_tokens = completion_tokens = 0
        try:
            async for chunk in response:
                model = getattr(chunk, "model", None) or model
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
            raise UpstreamLLMError(
                f"the model's answer broke off: {_describe(exc)}", code="llm_stream_interrupted"
            ) from exc
        yield StreamEnd(finish, _full_name(model, response), prompt_tokens, completion_tokens)

    async def aclose(self) -> None:
        # The router's HTTP clients live in LiteLLM's module-level cache; nothing to close here.
        return None


def _full_name(model: str | None, response: Any) -> str | None:
    """Custom providers' chunks carry the model without its provider (`local` for
    `hermes/local`); LiteLLM keeps the full string on the stream."""
    hidden = getattr(response, "_hidden_params", None) or {}
    full = hidden.get("litellm_model_name") if isinstance(hidden, dict) else None
    if model and isinstance(full, str) and "/" not in model and full.startswith("hermes/"):
        return full
    return model


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]
