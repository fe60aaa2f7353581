"""The one scorer: a passage's score by the index's unit counts, whatever else was found."""

from __future__ import annotations

from app.knowledge.analysis import Units, text_units
from app.knowledge.scoring import question_terms, score, term_df

REFUND = Units(" ".join(text_units("Refunds to a credit card take 7-15 working days.")))
CARD = Units(" ".join(text_units("We accept credit cards and Alipay.")))
HEADING: frozenset[str] = frozenset()
# 100 chunks: "refund" in 10 of them, "credit" and "card" in 40.
FREQUENCIES = {"": 100, "refund": 10, "credit": 40, "card": 40, "alipay": 5}


def _score(candidates: list[Units], question: str) -> list[float]:
    terms = question_terms(question)
    headings = [HEADING] * len(candidates)
    return score(terms, candidates, headings, 100, headings, FREQUENCIES)


def test_a_passage_scores_the_same_whatever_else_is_a_candidate() -> None:
    question = "refund to my credit card or alipay"
    alone = _score([REFUND], question)[0]
    together = _score([REFUND, CARD], question)[0]
    assert 0 < alone == together < 1
    # Counted among the candidates instead, the score moved with the company it kept.
    terms = question_terms(question)
    alone = score(terms, [REFUND], [HEADING], 100)[0]
    together = score(terms, [REFUND, CARD], [HEADING] * 2, 100)[0]
    assert alone != together


def test_a_term_no_chunk_has_makes_every_passage_cover_less() -> None:
    with_unknown = _score([REFUND], "refund to my credit card in bitcoin")[0]
    assert 0 < with_unknown < _score([REFUND], "refund to my credit card")[0]


def test_a_terms_count_is_its_most_common_forms() -> None:
    (refund,) = [t for t in question_terms("refund") if "refund" in t.units]
    assert term_df(refund, {"refund": 10, "退款": 25}) == 25
    assert term_df(refund, {}) == 0


def test_a_word_said_about_everything_does_not_outweigh_the_questions_point() -> None:
    # In a small collection "many" may occur once: by the documents' counts alone it would
    # weigh more than "points", which ten passages have.
    points = Units(" ".join(text_units("You earn 1 point for every CNY 1 you pay.")))
    many = Units(" ".join(text_units("Many parcels arrive within two days.")))
    frequencies = {"": 100, "point": 10, "many": 1}
    terms = question_terms("How many points do I get?")
    on_points, on_many = score(terms, [points, many], [HEADING] * 2, 100, None, frequencies)
    assert on_points > on_many


def test_a_chinese_pair_across_a_words_edge_is_not_a_term() -> None:
    units = {u for term in question_terms("钱可以退到我朋友的账户吗") for u in term.units}
    assert {"朋友", "退到"} <= units
    assert not {"我朋", "友的", "的账"} & units


def test_a_miswritten_chinese_word_meets_the_word_it_sounds_like() -> None:
    points = Units(" ".join(text_units("100积分抵1元，每次至少使用1000积分。")))
    other = Units(" ".join(text_units("积累的经验每次都有用。")))
    on_points, on_other = _score([points, other], "积份每次最少用多少")
    assert on_points > on_other > 0


def test_a_word_no_passage_has_counts_though_its_characters_are_found() -> None:
    # 明天 and 天气 are words no passage has; 明, 天 and 上海 are found. The weather in
    # Shanghai tomorrow is not answered by a delivery table that names Shanghai.
    table = Units(" ".join(text_units("江苏、浙江、上海、广东：1-2天。明日达：次日送达。")))
    frequencies = {"": 100, "上海": 2, "明": 6, "天": 14, "上": 6, "海": 5}
    terms = question_terms("明天上海天气怎么样")
    assert score(terms, [table], [HEADING], 100, None, frequencies)[0] < 0.55  # the threshold
