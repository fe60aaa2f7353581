"""A scenario's expectations against what happened: a list of failures in a fixed order, the
first of which the report shows (docs/evaluation.md, "Result and report")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.evaluation.client import TurnRecord
from app.evaluation.dbdiff import Diff, judge
from app.evaluation.scenario import Expect, MemoryMatch, Scenario
from app.text.script import has_cjk

# Tools whose success is a side effect: a forbidden one that ran is a forbidden write even
# when the database can't be seen (remote runs). Mirrors `risk: write|external` in tools.yaml.
WRITE_TOOLS = frozenset({"create_ticket", "request_refund", "request_return", "reset_password",
                         "update_contact_info", "send_email"})  # fmt: skip


@dataclass(frozen=True)
class Failure:
    kind: str  # forbidden_write, turn, approval, db, called, not_called, contains, ...
    where: str  # "scenario", "session 2", "session 1 turn 3"
    message: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.where}): {self.message}"


@dataclass
class SessionRecord:
    turns: list[TurnRecord] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)  # every assistant message, from the API
    memories: list[dict[str, Any]] = field(default_factory=list)  # at the session's end


@dataclass
class Played:
    """Everything a scenario run produced that the checks read."""

    sessions: list[SessionRecord] = field(default_factory=list)
    diff: Diff | None = None  # None: the demo database was not reachable


def judge_scenario(scenario: Scenario, played: Played) -> list[Failure]:
    failures: list[Failure] = []
    if played.diff is not None:
        verdict = judge(played.diff, scenario.db)
        failures += [Failure("forbidden_write", "scenario", m) for m in verdict.forbidden]
    failures += _forbidden_tools(scenario, played)
    all_turns: list[TurnRecord] = []
    sessions = zip(scenario.sessions, played.sessions, strict=False)
    for s_index, (session, record) in enumerate(sessions, 1):
        # The reply language is judged turn by turn (once per reply), in the innermost
        # language that applies; the wider scopes check everything else.
        language = session.expect.language or _language(scenario)
        for t_index, turn in enumerate(record.turns, 1):
            where = f"session {s_index} turn {t_index}"
            failures += _turn_outcome(turn, where)
            spec = session.turns[t_index - 1].expect if session.turns else Expect()
            failures += check(
                spec, [turn], turn.replies, turn.memories, where, spec.language or language
            )
        failures += check(
            session.expect, record.turns, record.replies, record.memories, f"session {s_index}"
        )
        all_turns += record.turns
    if played.diff is not None:
        failures += [Failure("db", "scenario", m) for m in judge(played.diff, scenario.db).missing]
    replies = [r for s in played.sessions for r in s.replies]
    memories = played.sessions[-1].memories if played.sessions else []
    failures += check(scenario.expect, all_turns, replies, memories, "scenario")
    failed = sum(t.status != "completed" for t in all_turns)
    allowed = scenario.expect.failed_turns or 0
    if failed > allowed:
        failures.append(Failure("turn", "scenario", f"{failed} turns failed, {allowed} allowed"))
    return _first_forbidden(failures)


def _language(scenario: Scenario) -> str:
    return scenario.expect.language or scenario.language


def _first_forbidden(failures: list[Failure]) -> list[Failure]:
    forbidden = [f for f in failures if f.kind == "forbidden_write"]
    return forbidden + [f for f in failures if f.kind != "forbidden_write"]


def _forbidden_tools(scenario: Scenario, played: Played) -> list[Failure]:
    banned = set(scenario.expect.not_called) | {
        t for s in scenario.sessions for t in s.expect.not_called
    }
    ran = {
        run.tool
        for s in played.sessions
        for turn in s.turns
        for run in turn.tools
        if run.status == "success" and run.tool in WRITE_TOOLS
    }
    return [
        Failure("forbidden_write", "scenario", f"{tool} ran although the scenario forbids it")
        for tool in sorted(banned & ran)
    ]


def _turn_outcome(turn: TurnRecord, where: str) -> list[Failure]:
    out = []
    if turn.status != "completed":
        out.append(Failure("turn", where, f"turn ended {turn.status}"))
    for seen in turn.approvals:
        if seen.decision == "unexpected":
            out.append(Failure("approval", where, f"unexpected approval request for {seen.tool}"))
    return out


def check(
    spec: Expect,
    turns: Sequence[TurnRecord],
    replies: Sequence[str],
    memories: list[dict[str, Any]] | None,
    where: str,
    language: str = "any",
) -> list[Failure]:
    """One scope's expectations (a turn, a session, the scenario); `language` is checked on
    the scope's replies unless it is "any"."""
    out: list[Failure] = []
    requested = {a.tool for t in turns for a in t.approvals}
    for tool in spec.approval_requested:
        if tool not in requested:
            out.append(Failure("approval", where, f"no approval was requested for {tool}"))
    runs = [r for t in turns for r in t.tools]
    for want in spec.called:
        if not any(
            r.tool == want.tool
            and (want.status is None or r.status == want.status)
            and (want.code is None or r.code == want.code)
            for r in runs
        ):
            seen = (
                ", ".join(
                    f"{r.tool}({r.status or 'started'}{', ' + r.code if r.code else ''})"
                    for r in runs
                )
                or "none"
            )
            out.append(Failure("called", where, f"{want.describe()} not called; tools: {seen}"))
    for tool in spec.not_called:
        if any(r.tool == tool for r in runs):
            out.append(Failure("not_called", where, f"{tool} was called"))
    folded = [r.casefold() for r in replies]
    for options in spec.contains:
        if not any(o.casefold() in r for o in options for r in folded):
            shown = " | ".join(options)
            out.append(
                Failure("contains", where, f"no reply contains {shown!r}; last: {_last(replies)}")
            )
    for text in spec.not_contains:
        hit = next((r for r in replies if text.casefold() in r.casefold()), None)
        if hit is not None:
            out.append(Failure("not_contains", where, f"a reply contains {text!r}: {_cut(hit)}"))
    out += _citations(spec, turns, where)
    if spec.memory is not None:
        out += _memory(spec, turns, memories, where)
    if language != "any":
        for reply in replies:
            got = reply_language(reply)
            if got is not None and got != language:
                out.append(
                    Failure(
                        "language", where, f"reply in {got}, expected {language}: {_cut(reply)}"
                    )
                )
                break
    return out


def _citations(spec: Expect, turns: Sequence[TurnRecord], where: str) -> list[Failure]:
    """`cited` / `not_cited` name documents by a substring of their title (case-insensitive):
    the version or the chunk is told apart by the reply's facts, not here."""
    cited = [c for t in turns for c in t.citations]
    titles = [str(c.get("title") or "") for c in cited]

    def among(want: str) -> bool:
        return any(want.casefold() in t.casefold() for t in titles)

    shown = ", ".join(_cite(c) for c in cited) or "none"
    out = [
        Failure("cited", where, f"no citation of {want!r}; cited: {shown}")
        for want in spec.cited
        if not among(want)
    ]
    out += [
        Failure("not_cited", where, f"{want!r} was cited; cited: {shown}")
        for want in spec.not_cited
        if among(want)
    ]
    if spec.no_citations and cited:
        out.append(Failure("no_citations", where, f"a reply cites {shown}"))
    return out


def _cite(citation: dict[str, Any]) -> str:
    title, section = citation.get("title") or "?", citation.get("section")
    return f"{title} › {section}" if section else str(title)


def _memory(
    spec: Expect, turns: Sequence[TurnRecord], memories: list[dict[str, Any]] | None, where: str
) -> list[Failure]:
    assert spec.memory is not None
    out = []
    items = memories or []
    for want in spec.memory.stored:
        if not any(_holds(want, m, ("active",)) for m in items):
            have = (
                ", ".join(
                    f"{m['key']}={m['value']} ({m['status']}, {m['confidence']})" for m in items
                )
                or "none"
            )
            out.append(Failure("memory", where, f"{want.describe()} not stored; memories: {have}"))
    for want in spec.memory.absent:
        hit = next((m for m in items if _holds(want, m, ("active", "pending"))), None)
        if hit is not None:
            out.append(
                Failure(
                    "memory",
                    where,
                    f"{hit['key']}={hit['value']} is stored ({hit['status']}, {hit['confidence']})",
                )
            )
    recalled = {k for t in turns for k in t.recalled}
    for key in spec.memory.recalled:
        if key not in recalled:
            out.append(
                Failure(
                    "memory", where, f"{key} not recalled; recalled: {sorted(recalled) or 'none'}"
                )
            )
    if spec.memory.forgot and not any(t.forgotten for t in turns):
        out.append(Failure("memory", where, "nothing was forgotten"))
    return out


def _holds(want: MemoryMatch, item: dict[str, Any], statuses: tuple[str, ...]) -> bool:
    return (
        item["key"] == want.key
        and item["status"] in statuses
        and (want.value is None or want.value.casefold() in str(item["value"]).casefold())
        and (want.min_confidence is None or float(item["confidence"]) >= want.min_confidence)
    )


_WORD = re.compile(r"\S+")


def reply_language(text: str) -> str | None:
    """The language a reply is written in: the script of its first word that is neither a
    number nor an id (tokens with digits, addresses, URLs are data, the same in both
    languages); None when it has no such word. Data quoted later in a sentence (a Chinese
    product name in an English reply) does not count: replies start in their own language."""
    for token in _WORD.findall(text):
        if any(ch.isdigit() for ch in token) or "@" in token or "://" in token:
            continue
        if has_cjk(token):
            return "zh"
        if any(ch.isascii() and ch.isalpha() for ch in token):
            return "en"
    return None


def _cut(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last(replies: Sequence[str]) -> str:
    return repr(_cut(replies[-1])) if replies else "no reply"
