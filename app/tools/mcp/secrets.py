"""Secrets from the MCP configuration never reach a log or status line.

Values expanded from `${VAR}` references, header values and secret-looking env values are
registered here; `mask` replaces them in any text, and `LogMasking` masks them in every log
record while MCP servers run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

MASK = "****"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words and numbers


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

    def data(self, value: Any) -> Any:
        """`value` (JSON-shaped: strings, lists, objects) with the secrets masked in every
        string, keys included."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


class LogMasking:
    """While installed, every log record made in this process has the secrets masked: its
    message, and the text of its exception. A record factory rather than logger filters,
    because the SDK and its HTTP client create loggers lazily and log exception texts that
    can carry URLs and headers."""

    def __init__(self, masker: SecretMasker) -> None:
        self.masker = masker
        self._previous: Callable[..., logging.LogRecord] = logging.LogRecord
        self._active = False

    def install(self) -> None:
        if self._active:
            return
        self._previous = logging.getLogRecordFactory()
        self._active = True
        logging.setLogRecordFactory(self._make)

    def remove(self) -> None:
        # If someone wrapped our factory since, we stay in their chain, passing records on.
        self._active = False
        if logging.getLogRecordFactory() == self._make:
            logging.setLogRecordFactory(self._previous)

    def _make(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self._previous(*args, **kwargs)
        if self._active and self.masker:
            self.mask(record)
        return record

    def mask(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is not ours to fix; leave it alone
            return
        masked = self.masker.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = self.masker.mask(logging.Formatter().formatException(record.exc_info))
