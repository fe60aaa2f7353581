"""The labelled retrieval set (data/knowledge/eval/questions.jsonl) and the demo documents it
points into: every label names a real document and a section that chunking gives it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from app.knowledge.chunking import chunk
from app.knowledge.parsing import decode, parse, split_front_matter

KNOWLEDGE = Path(__file__).resolve().parents[2] / "data" / "knowledge"
KINDS = {"plain", "paraphrase", "typo", "mixed", "unanswerable"}


def _questions() -> list[dict[str, Any]]:
    lines = (KNOWLEDGE / "eval" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _sections() -> dict[str, set[str]]:
    return {
        path.name: {" › ".join(c.section) for c in chunk(parse(path.read_bytes(), "markdown"))}
        for path in KNOWLEDGE.glob("*.md")
    }


def test_every_label_names_a_document_and_a_section_it_has() -> None:
    sections = _sections()

    for question in _questions():
        assert set(question) == {"q", "language", "document", "section", "kind"}, question
        assert question["q"].strip() and question["language"] in ("zh", "en"), question
        assert question["kind"] in KINDS, question
        if question["kind"] == "unanswerable":
            assert question["document"] is None and question["section"] is None, question
            continue
        assert question["document"] in sections, question
        assert (
            question["section"] is None or question["section"] in sections[question["document"]]
        ), question


def test_the_set_is_large_enough_in_both_languages_with_unanswerable_questions() -> None:
    questions = _questions()

    assert len(questions) >= 200
    assert len({q["q"] for q in questions}) == len(questions)  # no question counted twice
    languages = Counter(q["language"] for q in questions)
    assert languages["zh"] >= 80 and languages["en"] >= 80
    assert sum(q["document"] is None for q in questions) >= 20
    assert set(Counter(q["kind"] for q in questions)) == KINDS


def test_demo_documents_have_front_matter_and_at_least_30_in_two_languages() -> None:
    languages: Counter[str] = Counter()
    for path in KNOWLEDGE.glob("*.md"):
        meta, _ = split_front_matter(decode(path.read_bytes()))
        assert {"title", "language", "tags", "source_url"} <= set(meta), path.name
        assert meta["source_url"].startswith("https://help.example.com/"), path.name
        assert parse(path.read_bytes(), "markdown").title == meta["title"], path.name
        languages[meta["language"]] += 1

    assert sum(languages.values()) >= 30
    assert languages["zh"] >= 12 and languages["en"] >= 12


def test_one_demo_document_has_expired_and_one_is_not_yet_valid() -> None:
    validity = [split_front_matter(decode(path.read_bytes()))[0] for path in KNOWLEDGE.glob("*.md")]

    assert any(str(meta.get("valid_until", "9999")) < "2026-01-01" for meta in validity)
    assert any(str(meta.get("valid_from", "0000")) > "2027-01-01" for meta in validity)
