"""A tool call's arguments masked as an approval masks them, from the model's JSON text."""

from __future__ import annotations

import json

from app.tools.shaping import Redactor


def test_arguments_are_masked_field_by_field_and_kept_when_nothing_is_sensitive() -> None:
    redactor = Redactor()
    raw = json.dumps({"to": "li.lei@example.com", "token": "abc", "n": 3, "tags": ["13912345678"]})
    assert json.loads(redactor.arguments(raw)) == {
        "to": "l***@example.com",
        "token": "****",  # a secret's name hides the value whatever it looks like
        "n": 3,
        "tags": ["139****5678"],
    }
    plain = '{"order_id":  "202405201235"}'
    assert redactor.arguments(plain) == plain  # untouched, spacing and all
    # Not JSON (a model's malformed arguments): masked as text.
    assert redactor.arguments('{"phone": 13912345678') == '{"phone": 139****5678'
