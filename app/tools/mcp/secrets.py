"""Secrets from the MCP configuration never reach a log or status line.

Values expanded from `${VAR}` references, header values and secret-looking env values are
registered here; `mask` replaces them in any text. The SDK and its HTTP client log URLs and
exception texts on their own, so while MCP servers run, a filter on their loggers masks each
record before any handler sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

MASK = "****"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words and numbers
# Loggers of the libraries that talk to MCP servers for us.
LIBRARY_LOGGERS = ("mcp", "httpx2", "httpcore2", "httpx", "httpcore")


class SecretMasker:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        for value in secrets:
            self.add(value)

    def add(self, value: str) -> None:
        if len(value) >= _MIN_SECRET_LEN:
            self._secrets.add(value)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def mask(self, text: str) -> str:
        # Longest first, so a secret that contains another is masked whole.
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
        return text


class MaskingFilter(logging.Filter):
    """Rewrites a record's message with every known secret masked."""

    def __init__(self, masker: SecretMasker) -> None:
        super().__init__()
        self.masker = masker

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.masker:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is not ours to fix; leave it alone
            return True
        masked = self.masker.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            masked_exc = self.masker.mask(text)
            if masked_exc != text:
                record.msg = f"{record.msg}\n{masked_exc}"
                record.exc_info, record.exc_text = None, None
        return True


def install_filter(masker: SecretMasker) -> MaskingFilter:
    """Attach a masking filter to every existing library logger (a logger's filters only see
    records logged on that logger itself, so each one needs its own)."""
    flt = MaskingFilter(masker)
    for logger in _library_loggers():
        logger.addFilter(flt)
    return flt


def remove_filter(flt: MaskingFilter) -> None:
    for logger in _library_loggers():
        logger.removeFilter(flt)


def _library_loggers() -> list[logging.Logger]:
    names = [
        name
        for name in logging.root.manager.loggerDict
        if any(name == root or name.startswith(root + ".") for root in LIBRARY_LOGGERS)
    ]
    return [logging.getLogger(name) for name in {*names, *LIBRARY_LOGGERS}]
