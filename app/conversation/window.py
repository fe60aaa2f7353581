"""The context budget: what a model call sees when the conversation outgrows the window.

Pure planning, no I/O. The system prompt and the user's original goal are never dropped;
the last `keep_turns` turns are kept whole. Older turns are folded into the snapshot summary
once the full context reaches `summarize_at` of the budget (default 60 %), well before
`compress_at` (85 %); until a fold lands, old tool outputs are stubbed first, then old turns
are left out, anchor turns ("昨天", "这个/那个", "不要…", "must", "only") and their neighbours
last. Summaries are versioned: folding returns the version the snapshot should store.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.llm.gateway import ChatModel, ModelRequest, collect
from app.llm.messages import ChatMessage, ToolMessage
from app.settings import ContextSettings
from app.text.tokens import estimate_message, estimate_tokens

log = logging.getLogger(__name__)

_ANCHOR = re.compile(
    # time references
    r"昨天|前天|今天|明天|后天|上周|下周|本周|上个?月|下个?月|周[一二三四五六日末]|星期|礼拜|"
    r"\d+\s*[号日月]|\d{4}-\d{1,2}-\d{1,2}|之前|以后|"
    r"\b(yesterday|today|tomorrow|tonight)\b|\b(last|next) (week|month|time)\b|"
    r"\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|"
    # pointing back: 这个/那个, "that order"
    r"这个|那个|这些|那些|这笔|那笔|这单|那单|\b(this|that|these|those) (one|order|item|plan)\b|"
    # negations and explicit constraints
    r"不要|不是|不能|不用|没有|别(再|给|打|发|用|让)|必须|只要|只能|只用|只发|只走|一定要|务必|"
    r"千万|至少|最多|\b(not|don'?t|never|no longer|must|only|always|make sure)\b|"
    r"\b(at least|at most|no more than)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class WindowConfig:
    budget_tokens: int
    keep_turns: int
    summarize_at: float
    compress_at: float
    # Not settings: tuned constants, whose defaults are their only ones.
    summary_share: float = 0.15  # the summary may use at most this share of the budget
    stub_chars: int = 80

    @classmethod
    def from_settings(cls, settings: ContextSettings) -> WindowConfig:
        return cls(
            budget_tokens=settings.budget_tokens,
            keep_turns=settings.keep_turns,
            summarize_at=settings.summarize_at,
            compress_at=settings.compress_at,
        )

    @property
    def summary_tokens(self) -> int:
        return int(self.budget_tokens * self.summary_share)


@dataclass(frozen=True)
class ContextTurn:
    """One turn: the user's message, then the assistant's and tools' messages (OpenAI shape)."""

    number: int
    messages: list[ChatMessage]

    # Computed once per turn object: a session's cached history (app.conversation.history)
    # hands the same objects to every later turn's plan.
    @functools.cached_property
    def tokens(self) -> int:
        return sum(estimate_message(m) for m in self.messages)

    @functools.cached_property
    def anchor(self) -> bool:
        return is_anchor(self.user_text)

    @property
    def user_text(self) -> str:
        return next((m.get("content") or "" for m in self.messages if m["role"] == "user"), "")

    @property
    def reply_text(self) -> str:
        replies = [m.get("content") or "" for m in self.messages if m["role"] == "assistant"]
        return replies[-1] if replies else ""


@dataclass(frozen=True)
class ContextPlan:
    messages: list[ChatMessage]  # what to send
    tokens: int
    budget: int
    usage: float  # the full, unpruned context as a share of the budget
    summarize: bool  # folding `fold` into the summary is due
    urgent: bool  # usage reached compress_at: fold before this call, not after it
    fold: tuple[int, ...]  # turn numbers to fold, oldest first (a prefix of the turns)
    summary_version: int  # what the snapshot's summary_version becomes after folding
    anchors: tuple[int, ...] = ()
    pruned_tools: int = 0
    dropped: tuple[int, ...] = ()  # older turns left out of this call (not yet folded)
    over_budget: bool = False


def is_anchor(text: str) -> bool:
    return bool(text) and _ANCHOR.search(text) is not None


def _stub(message: ToolMessage, chars: int) -> ToolMessage:
    content = message["content"] or ""
    try:
        status = json.loads(content).get("status", "done")
    except (ValueError, AttributeError):
        status = "done"
    head = " ".join(content.split())[:chars]
    line = f"[{message.get('name') or 'tool'} {status}; output pruned to save context: {head}…]"
    return {**message, "content": line}


def _stubbed(turn: ContextTurn, chars: int) -> tuple[ContextTurn, int]:
    count, out = 0, list[ChatMessage]()
    for m in turn.messages:
        if m["role"] == "tool" and len(m["content"] or "") > chars * 2:
            out.append(_stub(m, chars))
            count += 1
        else:
            out.append(m)
    return ContextTurn(turn.number, out), count


def fixed_messages(
    system_prompt: str, goal: str | None, summary: str, extra: Sequence[ChatMessage] = ()
) -> list[ChatMessage]:
    out: list[ChatMessage] = [{"role": "system", "content": system_prompt}]
    if goal:
        out.append(
            {
                "role": "system",
                "content": "The user's original goal (stated at the start; keep it in view):\n"
                + goal,
            }
        )
    if summary:
        out.append(
            {"role": "system", "content": "Summary of the earlier conversation:\n" + summary}
        )
    # System notes first; quoted data (the recalled-memory block, role `user`) after them.
    out += [m for m in extra if m["role"] == "system"]
    return out + [m for m in extra if m["role"] != "system"]


def plan_context(
    system_prompt: str,
    goal: str | None,
    summary: str,
    turns: Sequence[ContextTurn],
    *,
    summary_version: int = 0,
    config: WindowConfig,
    extra: Sequence[ChatMessage] = (),
) -> ContextPlan:
    """Plan one model call. `turns` are those not yet folded into `summary`, oldest first;
    `extra` are further messages that must go in: system notes (NLU) and the recalled-memory
    block (a `user` message of quoted data); they are not turns and never count as one."""
    budget = config.budget_tokens
    fixed = fixed_messages(system_prompt, goal, summary, extra)
    fixed_tokens = sum(estimate_message(m) for m in fixed)
    keep = min(config.keep_turns, len(turns))
    older, recent = list(turns[: len(turns) - keep]), list(turns[len(turns) - keep :])
    kept_tokens = sum(t.tokens for t in older)
    recent_tokens = sum(t.tokens for t in recent)
    full = fixed_tokens + kept_tokens + recent_tokens
    usage = full / budget

    anchors = [i for i, t in enumerate(turns) if t.anchor]
    protected = {j for i in anchors for j in (i - 1, i, i + 1) if 0 <= j < len(turns)}

    folding: list[ContextTurn] = []
    if usage >= config.summarize_at and older:
        prefix = []
        for i, turn in enumerate(older):
            if i in protected:
                break
            prefix.append(turn)
        left = full - sum(t.tokens for t in prefix)
        folding = prefix if prefix and left < config.summarize_at * budget else older

    # Shape what goes out now: stub old tool output, then leave out old turns, anchors last.
    target = config.compress_at * budget
    kept = dict(enumerate(older))
    pruned = 0

    for i in list(kept):
        if fixed_tokens + kept_tokens + recent_tokens <= target:
            break
        before = kept[i].tokens
        kept[i], n = _stubbed(kept[i], config.stub_chars)
        kept_tokens += kept[i].tokens - before
        pruned += n
    for pass_protected in (False, True):
        for i in list(kept):
            if fixed_tokens + kept_tokens + recent_tokens <= target:
                break
            if (i in protected) == pass_protected:
                kept_tokens -= kept.pop(i).tokens
    if fixed_tokens + kept_tokens + recent_tokens > budget:
        # Last resort: stub tool output in recent turns but the current one.
        for j in range(len(recent) - 1):
            recent[j], n = _stubbed(recent[j], config.stub_chars)
            pruned += n
        recent_tokens = sum(t.tokens for t in recent)
    messages = fixed + [m for i in sorted(kept) for m in kept[i].messages]
    messages += [m for t in recent for m in t.messages]
    # Each turn's messages are counted once, by the turn: the same sum as over `messages`.
    tokens = fixed_tokens + kept_tokens + recent_tokens
    return ContextPlan(
        messages=messages,
        tokens=tokens,
        budget=budget,
        usage=usage,
        summarize=bool(folding),
        urgent=bool(folding) and usage >= config.compress_at,
        fold=tuple(t.number for t in folding),
        summary_version=summary_version + 1 if folding else summary_version,
        anchors=tuple(turns[i].number for i in anchors),
        pruned_tools=pruned,
        dropped=tuple(t.number for i, t in enumerate(older) if i not in kept),
        over_budget=tokens > budget,
    )


# -- summaries ---------------------------------------------------------------------------------


def _clip(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars] + "…"


def _turn_line(turn: ContextTurn) -> str:
    anchor = is_anchor(turn.user_text)
    said = _clip(turn.user_text, 400 if anchor else 160)
    line = f"{'!' if anchor else '-'} t{turn.number} user: {said}"
    tools = [m.get("name") or "tool" for m in turn.messages if m["role"] == "tool"]
    if tools:
        line += f" [tools: {', '.join(dict.fromkeys(tools))}]"
    if turn.reply_text:
        line += f" → assistant: {_clip(turn.reply_text, 120)}"
    return line


def extractive_summary(
    previous: str, turns: Sequence[ContextTurn], *, max_tokens: int, version: int
) -> str:
    """Offline summary: one line per turn, anchors ("!") kept longest, oldest lines dropped
    first when over `max_tokens`; merges with the previous summary."""
    lines = [ln for ln in previous.splitlines()[1:] if ln.startswith(("!", "-"))]
    lines += [_turn_line(t) for t in turns]
    numbers = [t.number for t in turns]

    def render(body: list[str]) -> str:
        last = max(numbers) if numbers else 0
        return "\n".join([f"Summary v{version} (extractive, through turn {last}):", *body])

    for marker in ("-", "!"):
        while estimate_tokens(render(lines)) > max_tokens:
            oldest = next((i for i, ln in enumerate(lines) if ln.startswith(marker)), None)
            if oldest is None:
                break
            del lines[oldest]
    return render(lines)


class Summarizer(Protocol):
    """Folds turns into the running summary; a model-backed one plugs in here. `scope` says
    whose conversation it is (`tenant_id`, `session_id`): a model call carries it in its
    metadata, so the tenant's masking policy applies to it."""

    async def summarize(
        self,
        previous: str,
        turns: Sequence[ContextTurn],
        *,
        max_tokens: int,
        version: int,
        scope: Mapping[str, str] | None = None,
    ) -> str: ...


class ExtractiveSummarizer:
    async def summarize(
        self,
        previous: str,
        turns: Sequence[ContextTurn],
        *,
        max_tokens: int,
        version: int,
        scope: Mapping[str, str] | None = None,
    ) -> str:
        return extractive_summary(previous, turns, max_tokens=max_tokens, version=version)


_SUMMARY_PROMPT = (
    "Update the running summary of a customer-service conversation with the turns below. "
    "Keep facts, open requests, decisions, time references and every constraint or refusal "
    "the user stated (e.g. 'do not call', '只要顺丰') in the user's own words. Plain lines, "
    "no preamble, at most {words} words."
)


class ModelSummarizer:
    """Summarises with the configured model (through the `ChatModel` seam); any failure, an
    empty answer or one over the cap falls back to the extractive summary."""

    def __init__(self, model: ChatModel, temperature: float) -> None:
        self.model = model
        self.temperature = temperature

    async def summarize(
        self,
        previous: str,
        turns: Sequence[ContextTurn],
        *,
        max_tokens: int,
        version: int,
        scope: Mapping[str, str] | None = None,
    ) -> str:
        transcript = "\n".join(_turn_line(t) for t in turns)
        request = ModelRequest(
            messages=[
                {"role": "system", "content": _SUMMARY_PROMPT.format(words=max_tokens // 2)},
                {"role": "user", "content": f"Summary so far:\n{previous}\n\nTurns:\n{transcript}"},
            ],
            phase="planning",
            temperature=self.temperature,
            max_tokens=max_tokens,
            metadata=dict(scope or {}),
        )
        header = f"Summary v{version} (model, through turn {max(t.number for t in turns)}):"
        try:
            text = (await collect(self.model.stream(request))).text.strip()
        except Exception:
            log.warning("model summary failed; using the extractive one", exc_info=True)
            text = ""
        if not text or estimate_tokens(text) + estimate_tokens(header) > max_tokens:
            return extractive_summary(previous, turns, max_tokens=max_tokens, version=version)
        return f"{header}\n{text}"


@dataclass(frozen=True)
class Folded:
    summary: str
    summary_version: int
    summarized_turns: int  # the snapshot's watermark: turns up to here live in the summary
    remaining: list[ContextTurn] = field(default_factory=list)


async def fold(
    plan: ContextPlan,
    summary: str,
    turns: Sequence[ContextTurn],
    summarizer: Summarizer,
    config: WindowConfig,
    scope: Mapping[str, str] | None = None,
) -> Folded:
    """Apply a plan's fold: the new summary, its version, the watermark, the turns left."""
    if not plan.fold:
        raise ValueError("this plan folds nothing")
    folding = [t for t in turns if t.number in plan.fold]
    text = await summarizer.summarize(
        summary,
        folding,
        max_tokens=config.summary_tokens,
        version=plan.summary_version,
        scope=scope,
    )
    through = max(plan.fold)
    return Folded(text, plan.summary_version, through, [t for t in turns if t.number > through])
