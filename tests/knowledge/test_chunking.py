"""Passages cut from parsed documents: sections, lists and tables kept whole, sentences too."""

from __future__ import annotations

import itertools

import pytest

from app.knowledge.chunking import chunk, sentences
from app.knowledge.parsing import Block, ParsedDocument, parse

ENGLISH = " ".join(
    f"Rule {n}: a refund to a bank card arrives within {n + 3} working days." for n in range(30)
)
CHINESE = "".join(f"第{n}条：退款将在{n + 3}个工作日内原路退回！" for n in range(60))


def _document(*blocks: Block) -> ParsedDocument:
    return ParsedDocument("Policy", list(blocks))


def test_short_sections_are_one_chunk_each_and_never_share_one() -> None:
    document = parse(
        b"# Returns\n\nSeven days.\n\n## Costs\n\nYou pay.\n\nWe pay for damage.\n",
        "markdown",
    )

    chunks = chunk(document)

    assert [(c.ordinal, c.section, c.text) for c in chunks] == [
        (0, ("Returns",), "Seven days."),
        (1, ("Returns", "Costs"), "You pay.\nWe pay for damage."),
    ]


@pytest.mark.parametrize("text", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_a_long_paragraph_is_cut_at_sentence_ends_with_a_little_overlap(text: str) -> None:
    chunks = chunk(
        _document(Block(("Refunds",), "paragraph", text)), target_chars=300, overlap_chars=80
    )

    assert len(chunks) > 2
    whole = set(sentences(text))
    for before, after in itertools.pairwise(chunks):
        assert after.section == ("Refunds",)
        assert len(before.text) <= 300
        first, last = sentences(after.text)[0], sentences(before.text)[-1]
        assert first in whole  # the cut falls at a sentence end
        assert first == last  # the sentence before the cut starts the next chunk
    assert {s for c in chunks for s in sentences(c.text)} == whole


def test_chinese_sentences_end_at_full_width_marks_and_english_ones_at_a_stop_and_space() -> None:
    assert sentences("退款7天到账。要发票吗？可以！Version 2.5 is out. Is it? Yes!") == [
        "退款7天到账。",
        "要发票吗？",
        "可以！",
        "Version 2.5 is out.",
        "Is it?",
        "Yes!",
    ]


def test_a_table_longer_than_the_target_stays_whole_in_one_chunk() -> None:
    table = "\n".join(f"| 区域 {n} | {n} 天 |" for n in range(80))
    document = _document(
        Block(("配送",), "paragraph", "各地区的配送时间如下："),
        Block(("配送",), "table", table),
        Block(("配送",), "paragraph", "节假日顺延。"),
    )

    chunks = chunk(document, target_chars=200)

    tables = [c for c in chunks if table in c.text]
    assert len(tables) == 1
    assert tables[0].text.startswith("各地区的配送时间如下：")  # the lead-in stays with it
    assert sum(c.text.count("| 区域 ") for c in chunks) == 80


def test_a_list_is_never_split_even_between_sentences_of_its_items() -> None:
    items = "\n".join(f"- Item {n}. It has two sentences. Really." for n in range(30))
    document = _document(Block((), "paragraph", "x " * 150), Block((), "list", items))

    chunks = chunk(document, target_chars=200, overlap_chars=40)

    assert [c.text for c in chunks if "- Item" in c.text] == [items]


def test_a_sentence_longer_than_the_target_is_cut_at_a_comma() -> None:
    run_on = "，".join(f"第{n}项不退" for n in range(100)) + "。"

    chunks = chunk(_document(Block((), "paragraph", run_on)), target_chars=120, overlap_chars=0)

    assert all(len(c.text) <= 120 for c in chunks)
    assert all(c.text.endswith(("，", "。")) for c in chunks)
    assert "".join(c.text for c in chunks) == run_on


def test_defaults_give_chunks_of_a_few_hundred_characters() -> None:
    chunks = chunk(_document(Block(("A",), "paragraph", ENGLISH + " " + ENGLISH)))

    assert all(300 <= len(c.text) <= 600 for c in chunks[:-1])
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_nonsense_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="target_chars"):
        chunk(_document(Block((), "paragraph", "a")), target_chars=0)


def test_a_sentence_longer_than_the_overlap_carries_only_its_end_from_a_word_boundary() -> None:
    chunks = chunk(_document(Block((), "paragraph", ENGLISH)), target_chars=300, overlap_chars=30)

    carried = chunks[1].text.split(" Rule ")[0]
    assert 0 < len(carried) <= 30
    assert sentences(chunks[0].text)[-1].endswith(carried)
    assert not carried.startswith(" ")
