"""What a remote model may see of a customer's phone, email, ID card and bank card numbers.

A per-tenant policy (`HERMES_MODEL_MASKING`, `HERMES_MODEL_MASKING_TENANTS`) picks one mode:

- `off`: the text goes as it is.
- `mask`: each value is replaced by the Redactor's own mask (`138****5678`); nothing comes
  back, so a tool the model calls gets the mask, not the value.
- `pseudonymise`: each value becomes a token, `«PHONE_7KQF»`, and the model's answer is
  read back through the same table: its text before the customer sees it, its tool-call
  arguments before they are validated and run.

A token is a keyed digest of (kind, value) under the session's key, so the same value is the
same token in every request of a session and a different one in any other session: nothing
needs storing, and nothing links one customer's sessions at the provider. A `Pseudonyms` table
is built from one request's messages and only ever resolves a token to a value in them (that
session's own conversation, as it is sent); a token it did not issue stays as it is.

Detection is `app.text.detectors`, the Redactor's own, in its order.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from app.llm.messages import ChatMessage
from app.settings import MASKING_KINDS, Settings
from app.text.detectors import DETECTORS, Detector

Mode = Literal["off", "mask", "pseudonymise"]
MODES: tuple[str, ...] = get_args(Mode)
KINDS: tuple[str, ...] = MASKING_KINDS  # the values HERMES_MODEL_MASKING_KINDS may name

# 32 symbols, none of them easy to misread (no 0/O, 1/I); 4 of them carry 20 bits.
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_SHORT, _LONG = 4, 10
_TOKEN = re.compile(r"«([A-Z]+(?:_[A-Z]+)*)_([A-Z2-9]{4,10})»")
# The start of a token that a streamed piece may have cut: held until the next piece.
_TOKEN_START = re.compile(r"«[A-Z2-9_]*")
_LONGEST_TOKEN = len("«BANK_CARD_»") + _LONG
# Every value of the four kinds has an "@" (email) or a run of 8 digits, spaces and dashes
# (phones, ID and bank cards): text with neither is passed without running the detectors.
_CANDIDATE = re.compile(r"\d[\d -]{6,}\d")
_KEPT = re.compile("\x00(\\d+)\x00")


@dataclass(frozen=True)
class MaskingPolicy:
    """The mode for each tenant (`tenants`, else `default`) and the kinds it covers."""

    default: Mode
    tenants: Mapping[str, Mode]
    kinds: frozenset[str]
    # Keys every session's tokens, so knowing a session id is not enough to recompute them
    # (a brute force over phone numbers would otherwise need only the id). Shared by the
    # processes when configured; else each process has its own, and a session's tokens
    # differ between processes, which costs nothing (a table is built per request).
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def mode_for(self, tenant_id: str | None) -> Mode:
        if tenant_id is None:
            return self.default
        return self.tenants.get(tenant_id, self.default)

    @property
    def active(self) -> bool:
        """Some tenant's text is changed (else nothing needs wrapping)."""
        modes = {self.default, *self.tenants.values()}
        return bool(self.kinds) and modes != {"off"}

    @classmethod
    def from_settings(cls, settings: Settings) -> MaskingPolicy:
        """`settings.masking`, keyed by the deployment's own secret when one is set (so a
        session's tokens agree between its processes), else by one chosen per process."""
        masking, secret = settings.masking, None
        for configured in (settings.auth.key_pepper, settings.auth.secret):
            if configured is not None:
                secret = b"model-masking\x1f" + configured.get_secret_value().encode()
                break
        return cls.of(masking.mode, masking.by_tenant, masking.kinds, secret)

    @classmethod
    def of(
        cls,
        default: str,
        tenants: Mapping[str, str],
        kinds: Iterable[str],
        secret: bytes | None = None,
    ) -> MaskingPolicy:
        """From settings' strings (checked there)."""
        for mode in (default, *tenants.values()):
            if mode not in MODES:
                raise ValueError(f"unknown masking mode {mode!r}")
        return cls(
            cast(Mode, default),
            {t: cast(Mode, m) for t, m in tenants.items()},
            frozenset(kinds),
            secret if secret else secrets.token_bytes(32),
        )


def _normal(kind: str, value: str) -> str:
    """One spelling per value, so `138 0013 8000` and `13800138000` share a token."""
    if kind == "email":
        return value.lower()
    if kind == "id_card":
        return value.upper()
    return re.sub(r"[^\d+]", "", value)


class Pseudonyms:
    """One request's table: hides values on the way out, reveals its own tokens on the way back.

    `mode` `mask` hides with the Redactor's masks and reveals nothing.
    """

    def __init__(self, mode: Mode, kinds: Iterable[str], key: bytes | None = None) -> None:
        self.mode = mode
        self._wanted = frozenset(kinds)
        # Every kind is looked for, so a value is what it is (an ID card number is not a bank
        # card number when only bank cards are hidden); only the wanted kinds are hidden.
        self._detectors: tuple[Detector, ...] = tuple(d for d in DETECTORS if d.kind in KINDS)
        self._key = key if key is not None else secrets.token_bytes(16)
        self._by_value: dict[tuple[str, str], str] = {}
        self._values: dict[str, str] = {}  # token -> the value as it was first written

    @classmethod
    def for_session(
        cls, mode: Mode, kinds: Iterable[str], session_id: str | None, secret: bytes = b""
    ) -> Pseudonyms:
        """The session's tokens, keyed by `secret` and the session; without a session, a key
        of this request's own."""
        key = None
        if session_id:
            label = b"hermes-model-masking\x1f" + session_id.encode()
            key = hmac.new(secret, label, hashlib.sha256).digest()
        return cls(mode, kinds, key)

    @property
    def issued(self) -> int:
        return len(self._values)

    # -- on the way out -------------------------------------------------------------------------

    def hide(self, text: str) -> str:
        if "@" not in text and not _CANDIDATE.search(text):
            return text  # most strings: nothing any detector could match
        kept: list[str] = []

        def keep(match: re.Match[str]) -> str:
            kept.append(match[0])
            return f"\x00{len(kept) - 1}\x00"

        for detector in self._detectors:
            if detector.kind not in self._wanted:
                text = detector.pattern.sub(keep, text)
            elif self.mode == "mask":
                text = detector.pattern.sub(detector.mask, text)
            else:
                text = detector.pattern.sub(self._tokens_of(detector.kind), text)
        if kept:
            text = _KEPT.sub(lambda m: kept[int(m[1])], text)
        return text

    def hide_messages(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Copies of `messages` with every value hidden: contents, and tool calls' arguments."""
        out: list[ChatMessage] = []
        for message in messages:
            copy: dict[str, Any] = dict(message)
            content = copy.get("content")
            if isinstance(content, str):
                copy["content"] = (
                    self._hide_json(content) if copy.get("role") == "tool" else self.hide(content)
                )
            if copy.get("tool_calls"):
                copy["tool_calls"] = [
                    {
                        **call,
                        "function": {
                            **call["function"],
                            "arguments": self._hide_json(call["function"]["arguments"]),
                        },
                    }
                    for call in copy["tool_calls"]
                ]
            out.append(cast(ChatMessage, copy))
        return out

    def _hide_json(self, text: str) -> str:
        """JSON text with values hidden inside its strings (where an escape such as `\\n`
        before a number would keep the detectors from seeing it in the raw text)."""
        return _in_json(text, self.hide)

    def _tokens_of(self, kind: str) -> Callable[[re.Match[str]], str]:
        return lambda match: self._token(kind, match[0])

    def _token(self, kind: str, value: str) -> str:
        normal = (kind, _normal(kind, value))
        token = self._by_value.get(normal)
        if token is None:
            digest = hmac.new(self._key, "\x1f".join(normal).encode(), hashlib.sha256).digest()
            symbols = "".join(_ALPHABET[b % 32] for b in digest)
            token = f"«{kind.upper()}_{symbols[:_SHORT]}»"
            if token in self._values:  # two values, one short digest: the later one gets more
                token = f"«{kind.upper()}_{symbols[:_LONG]}»"
            self._by_value[normal] = token
            self._values[token] = value
        return token

    # -- on the way back ------------------------------------------------------------------------

    def reveal(self, text: str) -> str:
        """`text` with each token this table issued replaced by its value; others left."""
        if not self._values or "«" not in text:
            return text
        return _TOKEN.sub(lambda m: self._values.get(m[0], m[0]), text)

    def reveal_arguments(self, arguments: str) -> str:
        """Tool-call arguments (JSON text, its strings possibly `\\u00ab`-escaped) with tokens
        replaced by their values; text that is not JSON has its tokens replaced as text."""
        return _in_json(arguments, self.reveal) if self._values else arguments

    def revealer(self) -> Revealer:
        return Revealer(self)


def _in_json(text: str, change: Callable[[str], str]) -> str:
    """JSON text with `change` applied to each string (and number) in it, or to the text itself
    when it is not JSON; unchanged text is returned as it was."""
    try:
        data = json.loads(text)
    except ValueError:
        return change(text)
    changed = _each_string(data, change)
    return text if changed == data else json.dumps(changed, ensure_ascii=False)


def _each_string(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _each_string(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_string(v, change) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        # A phone number sent as a JSON number is still a phone number.
        changed = change(str(value))
        return value if changed == str(value) else changed
    return value


class Revealer:
    """Reveals streamed text piece by piece; a piece ending in what may be the start of a
    token is held (that part only) until the next piece shows whether it is one."""

    def __init__(self, table: Pseudonyms) -> None:
        self._table = table
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = _pending_start(text)
        self._held = text[cut:]
        return self._table.reveal(text[:cut])

    def flush(self) -> str:
        text, self._held = self._held, ""
        return self._table.reveal(text)


def _pending_start(text: str) -> int:
    start = text.rfind("«")
    if start < 0:
        return len(text)
    tail = text[start:]
    if len(tail) < _LONGEST_TOKEN and _TOKEN_START.fullmatch(tail):
        return start
    return len(text)
