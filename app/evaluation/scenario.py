"""What a scenario says, as frozen data: parsed from YAML by `app.evaluation.load`, read by
the runner and the checks. The field-by-field meaning is in docs/evaluation.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from app.errors import ConfigError

DecisionKind = Literal["approve", "reject"]
Style = Literal["bare", "unit", "sentence"]

INTENTS = (
    "order_status",
    "track_shipment",
    "refund_request",
    "return_request",
    "password_reset",
    "update_contact",
    "complaint",
    "email_request",
    "greeting",
    "goodbye",
    "human_handoff",
    "out_of_scope",
    "policy_question",  # a question about a rule, answered from the knowledge base
)


class ScenarioError(ConfigError):
    """A scenario file that can't be run as written; `source` is the file and the place in it
    (`evals/x.yaml: sessions[1].turns[0]`), so a typo never silently drops an expectation."""


@dataclass(frozen=True)
class Decision:
    """How an operator answers an approval request."""

    decision: DecisionKind
    reason: str | None = None


@dataclass(frozen=True)
class ToolExpectation:
    tool: str
    status: str | None = None  # of the tool.completed event: success, error, fallback
    code: str | None = None  # the error code of a failed call

    def describe(self) -> str:
        extra = [x for x in (self.status, self.code) if x]
        return f"{self.tool}({', '.join(extra)})" if extra else self.tool


@dataclass(frozen=True)
class MemoryMatch:
    key: str
    value: str | None = None  # a substring of the stored value
    min_confidence: float | None = None

    def describe(self) -> str:
        text = self.key if self.value is None else f"{self.key}={self.value}"
        return (
            text if self.min_confidence is None else f"{text} (confidence ≥ {self.min_confidence})"
        )


@dataclass(frozen=True)
class MemoryExpect:
    stored: tuple[MemoryMatch, ...] = ()
    absent: tuple[MemoryMatch, ...] = ()
    recalled: tuple[str, ...] = ()
    forgot: bool = False


@dataclass(frozen=True)
class DbExpect:
    created: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    changed: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    ignore: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Expect:
    # each entry: alternatives, any one of which must appear in some reply
    contains: tuple[tuple[str, ...], ...] = ()
    not_contains: tuple[str, ...] = ()
    called: tuple[ToolExpectation, ...] = ()
    not_called: tuple[str, ...] = ()
    approval_requested: tuple[str, ...] = ()
    language: str | None = None  # None: inherit (turn -> session -> scenario language)
    memory: MemoryExpect | None = None
    failed_turns: int | None = None  # None: 0 at the scenario level, unchecked below
    # substrings of document titles: each must be among the scope's citations / none may be
    cited: tuple[str, ...] = ()
    not_cited: tuple[str, ...] = ()
    no_citations: bool = False  # no reply in scope cites anything


@dataclass(frozen=True)
class Turn:
    say: str
    operator: Decision | None = None
    expect: Expect = Expect()


@dataclass(frozen=True)
class Reaction:
    when: str  # a slot name, "any" or "done"
    say: str


@dataclass(frozen=True)
class Simulation:
    opening: str
    style: Style = "sentence"
    reactions: tuple[Reaction, ...] = ()
    closing: str | None = None
    max_turns: int = 8


DocumentFormat = Literal["markdown", "html", "text"]


@dataclass(frozen=True)
class SeedDocument:
    """A knowledge document the runner adds (`POST /v1/knowledge/documents`, as an operator)
    before a session starts. Same title (or source_url) as an existing document: a new version
    of it. Dates are ISO text (`2025-11-30`), passed on as written."""

    title: str
    content: str
    format: DocumentFormat = "markdown"
    language: str | None = None
    tags: tuple[str, ...] = ()
    source_url: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"title": self.title, "content": self.content, "format": self.format}
        optional = {
            "language": self.language,
            "tags": list(self.tags) or None,
            "source_url": self.source_url,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
        }
        return body | {k: v for k, v in optional.items() if v is not None}


@dataclass(frozen=True)
class Session:
    turns: tuple[Turn, ...] = ()
    simulate: Simulation | None = None
    operator: Decision | None = None
    expect: Expect = Expect()
    documents: tuple[SeedDocument, ...] = ()  # added before the session's first turn


@dataclass(frozen=True)
class SeedMemory:
    key: str
    value: str
    confidence: float = 1.0


@dataclass(frozen=True)
class Scenario:
    id: str
    path: str
    title: str
    language: Literal["zh", "en"]
    intents: tuple[str, ...]
    customer: str
    goal: str
    sessions: tuple[Session, ...]
    tenant: str = "default"
    tags: tuple[str, ...] = ()
    facts: dict[str, str] = field(default_factory=dict)
    setup_memories: tuple[SeedMemory, ...] = ()
    operator: Decision | None = None
    expect: Expect = Expect()
    db: DbExpect = DbExpect()  # strict: no `db` in the file means no write at all
    heldout: bool = False
