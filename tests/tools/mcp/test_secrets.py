"""Secrets are masked in text and in every log record while MCP runs."""

from __future__ import annotations

import logging

import pytest

from app.tools.mcp.secrets import MASK, LogMasking, SecretMasker


def test_masks_every_occurrence_longest_first() -> None:
    masker = SecretMasker(["token-abc", "token-abc-extended", "ab"])
    assert masker.mask("a=token-abc-extended b=token-abc") == f"a={MASK} b={MASK}"
    assert masker.mask("ab stays: too short to be a secret") == "ab stays: too short to be a secret"
    assert not SecretMasker()


def test_log_records_are_masked_while_installed(caplog: pytest.LogCaptureFixture) -> None:
    masker = SecretMasker(["s3cr3t-value"])
    masking = LogMasking(masker)
    masking.install()
    try:
        with caplog.at_level(logging.DEBUG):
            logging.getLogger("mcp.client.streamable_http").debug(
                "url %s", "http://h/?k=s3cr3t-value"
            )
            logging.getLogger("httpx2").info("GET http://h/?k=s3cr3t-value")
            try:
                raise ValueError("bad token s3cr3t-value")
            except ValueError:
                logging.getLogger("a.logger.made.just.now").exception("failed")
    finally:
        masking.remove()
    assert "s3cr3t-value" not in caplog.text
    assert caplog.text.count(MASK) >= 3
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("httpx2").info("after removal s3cr3t-value")
    assert "after removal s3cr3t-value" in caplog.text
