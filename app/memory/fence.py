"""Memory text that cannot pass for anything but data: neutral values and unforgeable fences.

Recalled memory reaches the model between an opening and a closing marker that carry a
random code made for that block (`<<memory qkzv…>>` … `<<end memory qkzv…>>`); stored text
cannot know the code. Values are neutralised as well, when written and again when read
(rows stored before this existed, or written by other means, are covered too): angle and
square brackets become harmless lookalikes, so `[End of memory]`, `[SYSTEM]`, `</memory>`,
`<|im_start|>` or a copy of a fence marker read as `(End of memory)`, `‹/memory›` and so on;
line breaks join the lines with " / " so a value stays on its own line; a role prefix
(`system:`) at the start of a line loses its colon; control and invisible format characters
go. `neutral` is idempotent: a value neutralised twice reads the same as once.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass, field

_BRACKETS = str.maketrans(
    {
        "[": "(",
        "［": "(",
        "【": "(",
        "〔": "(",
        "〖": "(",
        "]": ")",
        "］": ")",
        "】": ")",
        "〕": ")",
        "〗": ")",
        "<": "‹",
        "＜": "‹",
        "〈": "‹",
        "⟨": "‹",
        ">": "›",
        "＞": "›",
        "〉": "›",
        "⟩": "›",
    }
)
_ROLE_PREFIX = re.compile(
    r"^(system|assistant|user|developer|tool|function|human|ai|系统|助手|用户)\s*[:：]\s*",
    re.IGNORECASE,
)
_DROPPED = {"Cc", "Cf", "Co", "Cs"}  # controls, invisible format characters, private use


def _visible(line: str) -> str:
    if not line.isprintable():  # the per-character pass only for text that needs it
        line = "".join(
            ch for ch in line.replace("\t", " ") if unicodedata.category(ch) not in _DROPPED
        )
    return " ".join(line.split())


def neutral(text: str) -> str:
    """One line of plain text with nothing that reads as a role, a fence or a markup tag."""
    lines = []
    for raw in text.translate(_BRACKETS).splitlines():
        line = _visible(raw)
        line = _ROLE_PREFIX.sub(lambda m: f"{m.group(1)} - ", line)
        if line:
            lines.append(line)
    return " / ".join(lines)


_CODE_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _code() -> str:
    """16 random lowercase letters (75 bits). Letters only: a hex code could be all digits (1 in
    1,850), and the model-masking policy would then take it for a bank card number and send
    the model a token in its place, a different fence from the one the block was built with."""
    return "".join(secrets.choice(_CODE_LETTERS) for _ in range(16))


@dataclass(frozen=True)
class Fence:
    """The markers of one memory block; the code is new for every block."""

    code: str = field(default_factory=_code)

    @property
    def open(self) -> str:
        return f"<<memory {self.code}>>"

    @property
    def close(self) -> str:
        return f"<<end memory {self.code}>>"
