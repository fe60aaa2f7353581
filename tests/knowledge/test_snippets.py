"""What a person sees of a passage: of a search hit, the words the question matched; of a
citation, its start."""

from __future__ import annotations

from app.knowledge.snippets import ELLIPSIS, OPENING, WIDTH, matches, opening, snippet

FILLER = "Our team is glad to help with anything you need at any hour. " * 6
FACT = "Refunds reach the original payment method within 7 working days."
TAIL = " Other notes follow here, none of them about money." * 6


def test_a_short_passage_is_shown_whole_with_its_white_space_folded() -> None:
    assert snippet("Refunds\n\n| card | 7 days |\n", "refund") == "Refunds | card | 7 days |"


def test_the_excerpt_is_cut_around_the_match_at_word_boundaries() -> None:
    text = FILLER + FACT + TAIL
    shown = snippet(text, "how long until my refund arrives in working days")
    assert FACT in shown
    assert shown.startswith(ELLIPSIS) and shown.endswith(ELLIPSIS)
    assert len(shown) <= WIDTH + 2
    inner = shown.strip(ELLIPSIS)
    words = set(text.split())
    assert inner.split()[0] in words and inner.split()[-1] in words  # no word cut in two


def test_the_window_goes_where_most_matches_are() -> None:
    text = "refund once. " + FILLER + "refund window: refund within 7 working days." + TAIL
    assert "refund within 7 working days" in snippet(text, "refund working days")


def test_chinese_is_matched_by_character_pairs() -> None:
    fact = "退款将在收到退货后7个工作日内原路退回。"
    text = "我们的客服团队很高兴为您服务。" * 8 + fact + "其他说明。" * 30
    assert matches(text, "退款多久到账") == [text.index("退款")]
    shown = snippet(text, "退款多久到账")
    assert fact in shown and shown.startswith(ELLIPSIS)


def test_without_a_match_the_passage_starts_the_excerpt() -> None:
    text = FACT + TAIL
    shown = snippet(text, "opening hours")
    assert shown.startswith(FACT[:20]) and shown.endswith(ELLIPSIS)


def test_an_opening_is_the_start_of_the_passage_on_one_line() -> None:
    assert opening("Refunds above CNY 500\nare reviewed.") == "Refunds above CNY 500 are reviewed."
    long = "word " * 60
    cut = opening(long)
    assert cut == "word " * 30 + "word" + ELLIPSIS and len(cut) <= OPENING
    chinese = "退款会在七个工作日内原路退回。" * 20
    assert opening(chinese) == chinese[: OPENING - 1] + ELLIPSIS


def test_an_opening_reads_a_tables_rows_as_cells() -> None:
    table = "Refunds\n| Method | Time |\n| Card | 7 days |\nAsk us."
    assert opening(table) == "Refunds · Method: Time · Card: 7 days · Ask us."
