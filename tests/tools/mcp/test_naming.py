"""Names the model sees: `mcp__<server>__<tool>`, at most 64 characters, stable and unique."""

from __future__ import annotations

import re

from app.tools.mcp.naming import MAX_LENGTH, tool_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_a_name_that_fits_is_kept() -> None:
    assert tool_name("time", "get_current_time") == "mcp__time__get_current_time"


def test_long_names_are_clamped_with_a_stable_hash() -> None:
    long = "summarise_the_customer_history_for_the_last_twelve_months"
    name = tool_name("crm", long)
    assert len(name) == MAX_LENGTH
    assert VALID.match(name)
    assert name.startswith("mcp__crm__summarise_the_customer")
    assert name == tool_name("crm", long)  # the same tomorrow
    assert name != tool_name("crm", long + "_v2")  # same prefix, different tool
    assert name != tool_name("crm2", long)


def test_characters_a_model_rejects_are_replaced_and_hashed() -> None:
    dotted, underscored = tool_name("fs", "files.read"), tool_name("fs", "files_read")
    assert VALID.match(dotted)
    assert underscored == "mcp__fs__files_read"
    assert dotted != underscored
    assert dotted.startswith("mcp__fs__files_read_")
