"""Labels lose what a reader cannot see: controls, invisible format characters (zero-width,
bidirectional overrides, tags), lone surrogates; breaks become spaces; the rest stays."""

from __future__ import annotations

import pytest

from app.text.labels import clean_label, clean_labels


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("web frontend", "web frontend"),
        ("客服 前台", "客服 前台"),
        ("nul\x00here", "nulhere"),
        ("invoice\u202etxt.exe", "invoicetxt.exe"),  # right-to-left override
        ("ad\u2066min\u2069", "admin"),  # isolates
        ("zero\u200bwidth\u200d\ufeff", "zerowidth"),
        ("tag\U000e0041\U000e0042s", "tags"),  # hidden ASCII in tag characters
        ("two\nlines\tand\u2028more", "two lines and more"),
        ("lone \ud800 surrogate", "lone  surrogate"),
        ("full\u3000width\u00a0spaces", "full\u3000width\u00a0spaces"),  # visible spacing stays
        ("emoji 👍🏽", "emoji 👍🏽"),
    ],
)
def test_a_label_keeps_what_can_be_read(raw: str, clean: str) -> None:
    assert clean_label(raw) == clean
    assert clean_label(clean) == clean  # cleaning twice changes nothing


def test_every_string_of_a_json_value_is_cleaned_keys_too() -> None:
    raw = {"chan\u200bnel": "we\x00b", "tags": ["vi\u202ep", 3, None], "n": {"k\n": True}}
    assert clean_labels(raw) == {"channel": "web", "tags": ["vip", 3, None], "n": {"k ": True}}
