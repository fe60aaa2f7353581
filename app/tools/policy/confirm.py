"""Guard 5: tools marked `confirm` run only after the customer said yes.

Changing an account's phone or email, or sending a reset link, acts on what the customer
said, as the model understood it. So the runtime, not the model, reads the change back in
the customer's language (values masked, as an agent on the phone would) and ends the turn;
the call runs in the next turn only on a yes (app/conversation/confirmation.py). An argument
left out is read back as what it means ("the whole order amount") and, when the tool names a
resolver, what it comes to now ("179.00 (the whole order amount)"): a figure to say yes to.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Literal, cast

from app.tools.context import ToolContext
from app.tools.loader import resolve_python
from app.tools.policy.precheck import READ_TIMEOUT_S
from app.tools.shaping import Redactor
from app.tools.spec import ToolSpec

log = logging.getLogger(__name__)

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


Resolver = Callable[..., Awaitable[Mapping[str, Any]]]


@lru_cache(maxsize=64)
def _resolver(target: str) -> Resolver:
    return cast(Resolver, resolve_python(target))


async def resolved(spec: ToolSpec, ctx: ToolContext[Any], args: dict[str, Any]) -> dict[str, Any]:
    """What the arguments the call leaves out come to now, by the tool's resolver; {} when it
    has none, or it fails or is slow (the read-back then says only what they mean)."""
    if spec.confirm is None or spec.confirm.resolve is None:
        return {}
    missing = {name for name in spec.parameters.get("properties", {}) if args.get(name) is None}
    if not missing:
        return {}
    try:
        async with asyncio.timeout(min(READ_TIMEOUT_S, spec.timeout_s)):
            found = await _resolver(spec.confirm.resolve)(ctx, **args)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("confirm resolver of %s could not run: %s", spec.name, type(exc).__name__)
        return {}
    return {name: value for name, value in found.items() if name in missing and value is not None}


def readback(
    spec: ToolSpec,
    args: dict[str, Any],
    redactor: Redactor,
    resolved: Mapping[str, Any] | None = None,
) -> Readback:
    assert spec.confirm is not None
    labels, absent = spec.confirm.labels, spec.confirm.absent
    now = resolved or {}

    def shown(name: str, lang: str) -> str:
        value = args.get(name)
        if value is None:
            meaning = absent.get(name, {}).get(lang, "-")
            if name not in now:
                return meaning
            figure = _written(name, now[name], lang)
            if meaning == "-":
                return figure
            return f"{figure}（{meaning}）" if lang == "zh" else f"{figure} ({meaning})"
        return _written(name, value, lang)

    def _written(name: str, value: Any, lang: str) -> str:
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
