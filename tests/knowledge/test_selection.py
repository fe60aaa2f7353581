"""The candidate query's terms: weighed by the tenant's document frequencies, and the commonest
left out only while together they could not carry a passage to the threshold."""

from __future__ import annotations

from app.knowledge.lexicon import specificity
from app.knowledge.scoring import CALIBRATION, Term, idf, question_terms
from app.knowledge.selection import absent, needed, weighed
from app.knowledge.store import Wanted


def test_a_term_weighs_its_idf_and_a_glossary_term_its_most_common_form() -> None:
    terms = [Term((("refund",), ("money", "back"))), Term((("alipay",),)), Term((("bitcoin",),))]
    frequencies = {"": 100, "refund": 30, "money": 50, "back": 20, "alipay": 2}

    wanted = weighed(terms, frequencies)

    assert [w.forms for w in wanted] == [terms[0].forms, terms[1].forms]  # bitcoin: no chunk
    assert [w.weight for w in wanted] == [idf(30, 100), idf(2, 100)]


def test_the_commonest_terms_are_dropped_only_while_they_cannot_reach_the_threshold() -> None:
    common, middling, rare = (Wanted(((u,),), w) for u, w in (("a", 1.0), ("b", 2.0), ("c", 7.0)))
    share = 0.55 ** (1 / CALIBRATION)  # ~0.34 of the whole (10.0)
    lower = 0.4 ** (1 / CALIBRATION)  # ~0.19

    assert share * 10 > 3.0  # a chunk with only a and b covers 0.3: it cannot pass
    assert needed([common, middling, rare], 0.55) == [rare]
    assert 1.0 < lower * 10 < 3.0  # a alone cannot pass a threshold of 0.4; a and b could
    assert needed([common, middling, rare], 0.4) == [middling, rare]
    assert needed([], 0.55) == []


def test_words_no_chunk_has_weigh_in_the_whole_so_more_common_terms_are_left_out() -> None:
    # "refund" is rare, "card" common; "bitcoin" no chunk has. A chunk having only "card"
    # covers card / (card + refund + bitcoin's least), which cannot reach the threshold once
    # bitcoin is counted, though it could without it.
    terms = question_terms("refund to my card in bitcoin")
    frequencies = {"": 1000, "refund": 10, "card": 20}
    wanted = weighed(terms, frequencies)
    least = absent(terms, frequencies, 100)
    assert least == idf(100, 1000) * specificity("bitcoin")  # may be taken for a misspelling
    assert sorted(w.forms[0][0] for w in needed(wanted, 0.55)) == ["card", "refund"]
    assert [w.forms[0][0] for w in needed(wanted, 0.55, least)] == ["refund"]
    assert absent(question_terms("退款多久到账 比特币"), {"": 1000, "退款": 10}, 100) > 0
