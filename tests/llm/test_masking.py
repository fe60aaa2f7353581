"""Provider error text without hosts, addresses, keys or LiteLLM's bookkeeping."""

from __future__ import annotations

import pytest

from app.llm.masking import mask_provider_text


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        (
            "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API"
            " key provided: sk-live-abcdef1234567890, gateway llm-gw-07.corp.internal:8443",
            "Incorrect API key provided: sk-****, gateway [address]",
        ),
        ("short key sk-test refused", "short key sk-**** refused"),
        (
            "No deployments available for selected model, Try again in 5 seconds. Passed"
            " model=hermes-primary. cooldown_list=[('9f86d081884c7d659a2feaa0c55ad015', {})]",
            "No deployments available for selected model, Try again in 5 seconds. Passed"
            " model=hermes-primary",
        ),
        (
            "failed at https://api.example.com/v1/chat?key=abc with Authorization: Bearer abc.def",
            "failed at [url] with Authorization: **** ****",
        ),
        ("upstream 10.2.3.4:8080 and [::1]:8000 down", "upstream [address] and [address] down"),
        ("host gw.internal.example.org refused", "host [host] refused"),
        ("request 123e4567-e89b-12d3-a456-426614174000 failed", "request **** failed"),
        ("deployment 0123456789abcdef0123 is cooling", "deployment **** is cooling"),
        (
            "set the OPENAI_API_KEY environment variable",
            "set the HERMES_MODEL_API_KEY environment variable",
        ),
        ("Timeout Error: OpenAIException - slow", "slow"),
        ("first line\nsecond line with sk-abcdefabcdefabcdef", "first line"),
        (
            "The model gpt-4o-2024-08-06 does not exist",
            "The model gpt-4o-2024-08-06 does not exist",
        ),
    ],
)
def test_masks_what_identifies_where_and_with_what(raw: str, masked: str) -> None:
    assert mask_provider_text(raw) == masked


def test_cuts_long_text() -> None:
    masked = mask_provider_text("word " * 100, limit=40)
    assert len(masked) == 40 and masked.endswith("…")
