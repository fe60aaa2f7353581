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
