"""Issue 27's knowledge scenarios (evals/knowledge/, evals/heldout/ho-kb-*) are written before
the feature, so nothing here runs them: it checks they are enough, a fifth held out, in both
languages, every kind in both sets, and that every document they name exists (in
data/knowledge/ or in the scenario's own `documents`) and holds the facts they expect."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from app.evaluation.load import load_scenarios
from app.evaluation.scenario import Scenario
from app.knowledge.parsing import split_front_matter

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"policy-answer", "question-then-action", "after-lookup", "wording", "no-answer",
         "expired", "not-yet-valid", "document-changed", "follow-up", "injection"}  # fmt: skip
WORDING = {"typo", "paraphrase", "mixed-language"}
TODAY = date.today()


@dataclass(frozen=True)
class Doc:
    title: str
    text: str
    source_url: str | None
    valid_from: date | None
    valid_until: date | None

    @property
    def valid(self) -> bool:
        return (self.valid_from is None or self.valid_from <= TODAY) and (
            self.valid_until is None or TODAY <= self.valid_until
        )


def _day(value: Any) -> date | None:
    return None if value is None else date.fromisoformat(str(value)[:10])


def _demo() -> list[Doc]:
    docs = []
    for path in sorted((ROOT / "data" / "knowledge").glob("*.md")):
        meta, text = split_front_matter(path.read_text("utf-8"))
        valid = _day(meta.get("valid_from")), _day(meta.get("valid_until"))
        docs.append(Doc(meta["title"], text, meta.get("source_url"), *valid))
    return docs


SCENARIOS = [s for s in load_scenarios([ROOT / "evals"]) if "knowledge" in s.tags]


def _kinds(scenario: Scenario) -> set[str]:
    tags = set(scenario.tags)
    return (tags & KINDS) | ({"wording"} if tags & WORDING else set())


def test_enough_scenarios_a_fifth_held_out_both_languages_every_kind_in_both_sets() -> None:
    tuned = [s for s in SCENARIOS if not s.heldout]
    held = [s for s in SCENARIOS if s.heldout]
    assert len(tuned) >= 40 and len(held) >= 8 and 5 * len(held) >= len(SCENARIOS)
    for language in ("zh", "en"):
        assert sum(s.language == language for s in SCENARIOS) >= 0.4 * len(SCENARIOS)
    assert all(_kinds(s) for s in SCENARIOS), [s.id for s in SCENARIOS if not _kinds(s)]
    assert set().union(*map(_kinds, tuned)) == KINDS
    assert set().union(*map(_kinds, held)) == KINDS
    # a knowledge scenario outside these places would escape the pending switch's review
    for s in SCENARIOS:
        assert Path(s.path).parent.name == ("heldout" if s.heldout else "knowledge"), s.path
    everything_in_folder = load_scenarios([ROOT / "evals" / "knowledge"])
    assert all("knowledge" in s.tags for s in everything_in_folder)


def _library(scenario: Scenario) -> list[list[Doc]]:
    """The documents each session sees: the demo set, then each session's own, a document with
    the same source_url (else title) replacing the old version."""
    docs, per_session = _demo(), []
    for session in scenario.sessions:
        for new in session.documents:
            docs = [
                d
                for d in docs
                if not (d.source_url == new.source_url if new.source_url else d.title == new.title)
            ]
            valid = _day(new.valid_from), _day(new.valid_until)
            docs.append(Doc(new.title, new.content, new.source_url, *valid))
        per_session.append(docs)
    return per_session


def _titled(docs: list[Doc], want: str) -> list[Doc]:
    return [d for d in docs if want.casefold() in d.title.casefold()]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_named_documents_exist_and_hold_the_expected_facts(scenario: Scenario) -> None:
    for session, docs in zip(scenario.sessions, _library(scenario), strict=True):
        scopes = [t.expect for t in session.turns] + [session.expect]
        for expect in scopes:
            for want in expect.not_cited:
                named = _titled(docs, want)
                assert named, f"not_cited {want!r} names no document: the check could never fail"
                if {"expired", "not-yet-valid"} & set(scenario.tags):
                    assert not any(d.valid for d in named), f"{want!r} is valid today"
            cited = [d for want in expect.cited for d in _titled(docs, want) if d.valid]
            for want in expect.cited:
                assert _titled(docs, want), f"cited {want!r} names no document"
                assert any(d.valid for d in _titled(docs, want)), f"{want!r} is not valid today"
            if not expect.cited:
                continue
            for options in expect.contains:
                assert any(o.casefold() in d.text.casefold() for o in options for d in cited), (
                    f"none of {options} is in {[d.title for d in cited]}"
                )
