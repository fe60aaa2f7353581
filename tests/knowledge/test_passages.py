"""A citation is built in one place (`Citation.of`), from a passage's fields: as the
`search_knowledge` tool shows them, or a `Passage`'s own; both give the same citation."""

from __future__ import annotations

import json

from app.knowledge.passages import Citation, Passage, source_name
from app.knowledge.snippets import opening
from app.tools.builtin.knowledge import shown

PASSAGE = Passage(
    document_id="doc_1",
    chunk_id="chk_1_2",
    title="Refunds",
    section="Refunds › How long refunds take",
    text="| Method | Time |\n| Credit card | 7-15 working days |",
    language="en",
    score=0.8123,
)


def test_a_citation_names_its_chunk_and_shows_the_start_of_its_text() -> None:
    citation = Citation.of(shown(1, PASSAGE))

    assert citation == Citation(
        "doc_1",
        "chk_1_2",
        "Refunds",
        "Refunds › How long refunds take",
        "Method: Time · Credit card: 7-15 working days",
    )
    assert citation.snippet == opening(PASSAGE.text)


def test_a_passage_cites_itself_as_the_tools_view_of_it_does() -> None:
    assert PASSAGE.citation == Citation.of(shown(1, PASSAGE))


def test_a_citation_travels_with_its_keys_in_one_order() -> None:
    # The stored message's metadata and `message.completed` carry this, byte for byte.
    text = json.dumps(PASSAGE.citation.as_dict(), ensure_ascii=False)
    assert text == (
        '{"document_id": "doc_1", "chunk_id": "chk_1_2", "title": "Refunds", '
        '"section": "Refunds › How long refunds take", '
        '"snippet": "Method: Time · Credit card: 7-15 working days"}'
    )


def test_a_missing_field_reads_as_empty() -> None:
    assert Citation.of({"document_id": "doc_1", "chunk_id": 7}) == Citation(
        "doc_1", "7", "", "", ""
    )


def test_a_source_is_named_by_its_title_once_then_its_section() -> None:
    assert source_name("Refunds", "Refunds › Large refunds") == "Refunds › Large refunds"
    assert source_name("Refunds", "Large refunds") == "Refunds › Large refunds"
    assert source_name("Refunds", "Refunds") == "Refunds"
    assert source_name("Refunds", "") == "Refunds"
