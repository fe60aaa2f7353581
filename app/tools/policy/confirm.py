"""Guard 5: tools marked `confirm` run only after the customer said yes.

Changing an account's phone or email, or sending a reset link, acts on what the customer
said, as the model understood it. So the runtime, not the model, reads the change back in
the customer's language (values masked, as an agent on the phone would) and ends the turn;
the call runs in the next turn only on a yes (app/conversation/confirmation.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from app.tools.shaping import Redactor
from app.tools.spec import ToolSpec

Lang = Literal["en", "zh"]

_PLACEHOLDER = re.compile(r"\{(\w+)\}")

QUESTION = {
    "en": "Please confirm: {change}. Reply yes or no: shall I go ahead?",
    "zh": "请确认：{change}。请回复“是”或“不”：现在为您办理吗？",
}


@dataclass(frozen=True)
class Readback:
    en: str
    zh: str

    def question(self, lang: Lang) -> str:
        return QUESTION[lang].format(change=self.en if lang == "en" else self.zh)

    def to_dict(self) -> dict[str, str]:
        return {"en": self.en, "zh": self.zh}


def mask_value(value: Any, redactor: Redactor) -> str:
    """A value as it is read back: masked like everywhere else, and long free text (an
    address) shortened to its ends so the customer recognises it without hearing it all. A
    number that is not masked (an order number) is read in full: it is what they check."""
    text = str(value)
    masked = redactor.text(text)
    if masked != text or len(text) <= 10 or text.isdigit():
        return masked
    return text[:6] + "***" + text[-2:]


def readback(spec: ToolSpec, args: dict[str, Any], redactor: Redactor) -> Readback:
    assert spec.confirm is not None
    labels, absent = spec.confirm.labels, spec.confirm.absent

    def shown(name: str, lang: str) -> str:
        value = args.get(name)
        if value is None:
            return absent.get(name, {}).get(lang, "-")
        if isinstance(value, float):
            value = f"{value:.2f}"  # an amount as money is written: 89.00, not 89.0
        label = labels.get(name, {}).get(lang, {}).get(str(value))
        return label if label is not None else mask_value(value, redactor)

    texts: dict[str, str] = {}
    for lang in ("en", "zh"):
        template = spec.confirm.text.get(lang)
        if template is None:
            pairs = ", ".join(f"{k} = {shown(k, lang)}" for k in sorted(args))
            generic = "run {tool} ({pairs})" if lang == "en" else "执行 {tool}（{pairs}）"
            texts[lang] = generic.format(tool=spec.name, pairs=pairs)
        else:
            texts[lang] = _PLACEHOLDER.sub(partial(_fill, shown, lang), template)
    return Readback(en=texts["en"], zh=texts["zh"])


def _fill(shown: Callable[[str, str], str], lang: str, match: re.Match[str]) -> str:
    return shown(match[1], lang)
