"""BIO labels, decoding, and the blinding used in training."""

from __future__ import annotations

from app.nlu.slot_features import bio_labels, decode, sentence_features, shape
from app.text.fold import fold, tokenize


def test_labels_and_decoding_round_trip() -> None:
    text = "退 ¥89.90 给订单202405201235"
    tokens = tokenize(text)
    spans = [("amount", 2, 8), ("order_id", 12, 24)]
    labels = bio_labels(tokens, spans)
    assert labels == ["O", "B-amount", "I-amount", "O", "O", "O", "B-order_id"]
    assert decode(tokens, labels) == spans


def test_decoding_trims_punctuation_and_starts_on_a_stray_inside_tag() -> None:
    tokens = tokenize("……蓝牙耳机，")
    labels = ["B-product", "I-product", "I-product", "I-product", "I-product", "I-product",
              "I-product"]  # fmt: skip
    assert decode(tokens, labels) == [("product", 2, 6)]
    tokens = tokenize("+86 138")
    assert decode(tokens, ["I-phone", "I-phone", "I-phone"]) == [("phone", 0, 7)]


def test_shapes_generalise_ids() -> None:
    assert shape("sf123456789cn") == "a2d9a2"
    assert shape("202405201234") == "d12"


def test_blinded_tokens_lend_no_identity_to_themselves_or_their_neighbours() -> None:
    text = "我买的蓝牙耳机到了"
    tokens = tokenize(text)
    plain = sentence_features(fold(text), tokens)
    blind = sentence_features(fold(text), tokens, blind=frozenset({3, 4, 5, 6}))
    assert "w=蓝" in plain[3] and "w=蓝" not in blind[3]
    assert "1w=蓝" in plain[2] and "1w=蓝" not in blind[2]
    assert "-1w=的" in blind[3]  # the context stays
    assert all("机" not in f for f in blind[7] if f.startswith(("-1", "-2")))


def test_the_gazetteer_marks_dates_and_amounts() -> None:
    text = "明天退我120块"
    features = sentence_features(fold(text), tokenize(text))
    assert "gz=date:B" in features[0] and "gz=date:I" in features[1]
    assert "gz=amount:B" in features[4] and "gz=amount:I" in features[5]
