"""tools.yaml is checked against a meta-schema; errors carry the line and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ToolsFileError
from app.settings import PROJECT_ROOT
from app.tools.loader import load_tools, resolve_python

GOOD_TOOL = """
  - name: ping
    description: Answers pong. Use it only to test connectivity; no side effects.
    risk: read
    parameters:
      type: object
      additionalProperties: false
      properties:
        n: {type: integer}
    handler:
      python: app.tools.builtin.clock:current_time
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(body)
    return path


def test_project_tools_file_loads_and_resolves() -> None:
    specs = load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python)
    names = [s.name for s in specs]
    assert "get_current_time" in names
    assert len(names) == len(set(names))
    for spec in specs:
        assert spec.parameters["additionalProperties"] is False


def test_defaults_apply(tmp_path: Path) -> None:
    specs = load_tools(write(tmp_path, "version: 1\ndefaults: {timeout_s: 3}\ntools:" + GOOD_TOOL))
    assert specs[0].timeout_s == 3 and specs[0].rate_limit == 5.0


BAD_SCHEMA = GOOD_TOOL.replace("{type: integer}", "{type: integr}")
AGAIN = GOOD_TOOL.replace("name: ping", "name: ping  # again")
OPEN_PARAMS = GOOD_TOOL.replace("additionalProperties: false", "additionalProperties: true")
MULTILINE_TEXT = GOOD_TOOL.replace("{type: integer}", "{type: string, x-multiline: sometimes}")


@pytest.mark.parametrize(
    ("body", "marker", "reason"),
    [
        ("version: 1\ntools:\n  - name: x\n", "- name: x", "required"),
        ("version: 1\ntools:" + GOOD_TOOL.replace("risk: read", "risk: maybe"), "risk:", "risk"),
        ("version: 1\ntools:" + OPEN_PARAMS, "additionalProperties: true", "additionalProperties"),
        ("version: 1\ntools:" + GOOD_TOOL + AGAIN, "# again", "duplicate tool name"),
        ("version: 1\ntools:\n  - [unclosed\n", None, "not valid YAML"),
        ("version: 1\ntools:" + BAD_SCHEMA, "n: {type: integr}", "valid JSON Schema"),
        ("version: 1\ntools:" + MULTILINE_TEXT, "x-multiline", "x-multiline"),
    ],
)
def test_errors_name_line_and_reason(
    tmp_path: Path, body: str, marker: str | None, reason: str
) -> None:
    path = write(tmp_path, body)
    lines = body.splitlines()
    with pytest.raises(ToolsFileError) as info:
        load_tools(path, resolve=resolve_python)
    message = str(info.value)
    if marker is not None:
        line = next(i for i, text in enumerate(lines, 1) if marker in text)
        assert message.startswith(f"{path}:{line}:"), message
    assert reason in message


def test_multi_line_fields_are_declared_with_a_boolean(tmp_path: Path) -> None:
    body = GOOD_TOOL.replace("{type: integer}", "{type: string, x-multiline: true}")
    [spec] = load_tools(write(tmp_path, "version: 1\ntools:" + body))
    assert spec.parameters["properties"]["n"]["x-multiline"] is True


def test_unresolvable_handler(tmp_path: Path) -> None:
    body = "version: 1\ntools:" + GOOD_TOOL.replace("clock:current_time", "clock:nope")
    with pytest.raises(ToolsFileError, match="handler not found"):
        load_tools(write(tmp_path, body), resolve=resolve_python)


def test_rule_field_must_be_a_parameter(tmp_path: Path) -> None:
    body = (
        "version: 1\ntools:"
        + GOOD_TOOL
        + (
            "    business_rules:\n"
            "      - {kind: max_value, field: amount, limit: 5, on_violation: reject}\n"
        )
    )
    with pytest.raises(ToolsFileError, match="rule field 'amount'"):
        load_tools(write(tmp_path, body))


HISTORY = """    history_rules:
      - kind: cumulative_max
        field: n
        per: customer
        limit: 10
        history: {target}
        on_violation: approval
"""
CONFIRM = """    confirm:
      en: "ping {arg}"
      zh: "ping {arg}"
"""


def _with(extra: str) -> str:
    return "version: 1\ntools:" + GOOD_TOOL.replace("    handler:", extra + "    handler:")


def test_history_rules_and_confirmation_load(tmp_path: Path) -> None:
    body = _with(
        HISTORY.format(target="tests.tools.policy.test_history:paid_out")
        + CONFIRM.replace("{arg}", "{n}")
    )
    spec = load_tools(write(tmp_path, body), resolve=resolve_python)[0]
    assert spec.history_rules[0].per == "customer" and spec.history_rules[0].limit == 10
    assert spec.confirm is not None and spec.confirm.text["en"] == "ping {n}"


@pytest.mark.parametrize(
    ("extra", "marker", "reason"),
    [
        (HISTORY.format(target="app.tools.builtin.clock:nope"), "history:", "history function"),
        (HISTORY.format(target="x:y").replace("field: n", "field: m"), "- kind", "'m'"),
        (CONFIRM.replace("{arg}", "{who}"), 'en: "ping', "{who}"),
        (HISTORY.format(target="x:y").replace("        per: customer\n", ""), "- kind", "per"),
    ],
)
def test_bad_history_rules_and_confirmations(
    tmp_path: Path, extra: str, marker: str, reason: str
) -> None:
    body = _with(extra)
    path = write(tmp_path, body)
    with pytest.raises(ToolsFileError) as info:
        load_tools(path, resolve=resolve_python)
    line = next(i for i, text in enumerate(body.splitlines(), 1) if marker in text)
    assert str(info.value).startswith(f"{path}:{line}:"), str(info.value)
    assert reason in str(info.value)


def test_hermes_schema_keywords_never_reach_the_model() -> None:
    specs = {s.name: s for s in load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python)}
    email = specs["send_email"]
    assert email.parameters["properties"]["body"]["x-multiline"] is True  # for validation
    assert "x-multiline" not in str(email.model_schema())
