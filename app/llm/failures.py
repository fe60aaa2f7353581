"""What a failed model call means, said the same way whichever transport made it.

A transport (the direct OpenAI-compatible client, LiteLLM) turns its own exceptions
into a `ModelFailure`: a code, the provider's HTTP status when there was one, and a masked
detail. From the code follow everything else: the fixed message a client sees, whether another
try can help, and whether the failure counts against the model's breaker.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Literal

from app.errors import UpstreamLLMError
from app.llm.gateway import ModelRoute
from app.llm.masking import mask_provider_text

MESSAGES = {
    "llm_no_api_key": "no API key is set for the model provider; set HERMES_MODEL_API_KEY",
    "llm_auth_failed": ("the model provider rejected the credentials; check HERMES_MODEL_API_KEY"),
    "llm_unreachable": "the model provider could not be reached",
    "llm_timeout": "the model provider timed out",
    "llm_rate_limited": "the model provider is limiting the rate of requests",
    "llm_model_not_found": "the model provider does not know the model; check HERMES_MODEL",
    "llm_context_too_long": "the conversation is too long for the model",
    "llm_bad_request": "the model provider refused the request",
    "llm_unavailable": "the model provider failed to answer",
    "llm_stream_interrupted": "the model's answer broke off",
}
# The provider's own words about credentials are about keys and variables Hermes doesn't use.
_NO_DETAIL = frozenset({"llm_no_api_key", "llm_auth_failed"})
# Caused by this request or this configuration: the same request fails the same way again.
_NOT_RETRIED = frozenset(
    {
        "llm_no_api_key",
        "llm_auth_failed",
        "llm_model_not_found",
        "llm_context_too_long",
        "llm_bad_request",
    }
)
# Signs that the model is unusable for now, whatever is asked: these open its breaker.
_BREAKS = frozenset(
    {
        "llm_no_api_key",
        "llm_auth_failed",
        "llm_unreachable",
        "llm_model_not_found",
        "llm_unavailable",
        "llm_stream_interrupted",
    }
)

Verdict = Literal["failure", "timeout", "neutral", "healthy"]


def message_for(code: str, model: str, detail: str = "") -> str:
    text = f"{MESSAGES.get(code, 'the model could not answer')} ({model})"
    if detail and code not in _NO_DETAIL:
        text += f": {detail}"
    return text


def code_for_status(status: int) -> str:
    """The code of an HTTP error answer from an OpenAI-compatible server."""
    if status in (401, 403):
        return "llm_auth_failed"
    if status == 404:
        return "llm_model_not_found"
    if status == 408:
        return "llm_timeout"
    if status == 429:
        return "llm_rate_limited"
    if 400 <= status < 500 and status != 409:
        return "llm_bad_request"
    return "llm_unavailable"


# How servers say a request is longer than the model's context (OpenAI's `code`, vLLM's and
# DeepSeek's "maximum context length", llama.cpp's "exceeds the available context size").
_CONTEXT = re.compile(
    r"(?i)context[_ ]length|maximum context|context (?:window|size)|too many tokens|"
    r"prompt is too long"
)


def says_context_too_long(text: str) -> bool:
    return bool(_CONTEXT.search(text))


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the provider asked to wait: `retry-after-ms`, or `retry-after` in seconds or as
    an HTTP date; None when it said nothing usable."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, AttributeError):
        return None


class ModelFailure(UpstreamLLMError):
    """One model could not answer. The message is fixed per code plus a masked detail; the
    provider's raw text is not kept."""

    def __init__(
        self,
        code: str,
        model: str,
        *,
        status: int | None = None,
        detail: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message_for(code, model, mask_provider_text(detail)), code=code)
        self.model = model
        self.provider_status = status  # the provider's HTTP status, when it answered
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Worth another try on the same model: not for auth or the request's own faults
        (4xx other than 408, 409 and 429)."""
        if self.code in _NOT_RETRIED:
            return False
        status = self.provider_status
        if status is not None and 400 <= status < 500:
            return status in (408, 409, 429)
        return True

    @property
    def verdict(self) -> Verdict:
        """What the failure says about the model's health, for its breaker."""
        if self.code == "llm_timeout":
            return "timeout"
        if self.code in _BREAKS:
            return "failure"
        if self.code == "llm_rate_limited":
            return "neutral"
        return "healthy"  # it answered, only not to this request


class ModelsFailed(UpstreamLLMError):
    """No configured model answered; `route` says what each of them did."""

    def __init__(self, code: str, message: str, route: ModelRoute) -> None:
        super().__init__(message, code=code)
        self.route = route


def as_failure(exc: BaseException, model: str) -> ModelFailure:
    """Any exception out of a transport, as a `ModelFailure` of `model`."""
    if isinstance(exc, ModelFailure):
        return exc
    if isinstance(exc, UpstreamLLMError):
        return ModelFailure(exc.code, model, detail=exc.message)
    if isinstance(exc, TimeoutError):
        return ModelFailure("llm_timeout", model)
    return ModelFailure("llm_unavailable", model, detail=type(exc).__name__)
