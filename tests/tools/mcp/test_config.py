"""mcp_servers.json: the common format, Hermes' options, `${VAR}` secrets, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.errors import McpConfigError
from app.tools.mcp.config import (
    HttpTarget,
    StdioTarget,
    load_mcp_config,
    parse_mcp_config,
)

ENV = {"CRM_TOKEN": "crm-secret-0123456789", "HOME_DIR": "/srv/hermes"}


def test_stdio_and_http_servers_with_options(tmp_path: Path) -> None:
    path = tmp_path / "mcp_servers.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": "mcp-server-time",
                        "args": ["--local-timezone", "UTC"],
                        "env": {"LEVEL": "debug"},
                        "cwd": "${HOME_DIR}",
                        "tool_filter": {"include": ["get_*"]},
                        "risk": {"get_current_time": "read"},
                        "timeout_s": 5,
                    },
                    "crm": {
                        "url": "https://crm.example.com/mcp",
                        "headers": {"Authorization": "Bearer ${CRM_TOKEN}"},
                        "trust": "trusted",
                        "enabled": False,
                    },
                    "legacy": {"url": "http://127.0.0.1:9/sse", "type": "sse"},
                }
            }
        )
    )
    config = load_mcp_config(path, ENV)
    time, crm, legacy = config.servers["time"], config.servers["crm"], config.servers["legacy"]
    assert isinstance(time.target, StdioTarget)
    assert time.target.args == ("--local-timezone", "UTC")
    assert time.target.cwd == "/srv/hermes"
    assert time.target.env == {"LEVEL": "debug"}
    assert (time.trusted, time.timeout_s, time.transport) == (False, 5, "stdio")
    assert time.tool_filter.admits("get_current_time")
    assert not time.tool_filter.admits("convert_time")
    assert time.risk_override("get_current_time") == "read"
    assert time.risk_override("convert_time") is None
    assert isinstance(crm.target, HttpTarget)
    assert crm.target.headers == {"Authorization": "Bearer crm-secret-0123456789"}
    assert (crm.trusted, crm.enabled, crm.transport) == (True, False, "streamable_http")
    assert legacy.transport == "sse"
    assert [s.name for s in config.enabled()] == ["time", "legacy"]
    # Values from the environment and header values are secrets.
    assert config.masker.mask("Bearer crm-secret-0123456789") == "****"
    assert "crm-secret" not in crm.display_target(config.masker)


def test_tool_filter_exclude_and_first_matching_risk_wins() -> None:
    config = parse_mcp_config(
        {
            "mcpServers": {
                "s": {
                    "command": "x",
                    "tool_filter": {"exclude": ["delete_*", "admin_*"]},
                    "risk": {"get_*": "read", "*": "write"},
                    "intents": {"get_order*": ["query_order_status", "refund"]},
                }
            }
        }
    )
    server = config.servers["s"]
    assert server.tool_filter.admits("get_order")
    assert not server.tool_filter.admits("delete_order")
    assert server.risk_override("get_order") == "read"
    assert server.risk_override("refund") == "write"
    assert server.intents_for("get_order_status") == ("query_order_status", "refund")
    assert server.intents_for("refund") == ()


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"a__b": {"command": "x"}}, "server 'a__b': the name must be"),
        ({"bad name": {"command": "x"}}, "server 'bad name': the name must be"),
        ({"s": {"command": "x", "url": "http://h"}}, "server 's': give either 'command'"),
        ({"s": {"args": []}}, "server 's': give either 'command'"),
        ({"s": {"url": "ftp://h"}}, "server 's': url: url must start with http"),
        ({"s": {"command": "x", "colour": "red"}}, "server 's': colour: unknown option"),
        ({"s": {"command": "x", "trust": "yes"}}, "server 's': trust:"),
        ({"s": {"command": "x", "risk": {"t": "huge"}}}, "server 's': risk.t:"),
        ({"s": {"command": "x", "timeout_s": 0}}, "server 's': timeout_s:"),
        ({"s": {"command": "x", "env": {"K": "${MISSING_VAR}"}}}, "env.K refers to ${MISSING_VAR}"),
        ({"s": "mcp-server-time"}, "server 's': expected an object"),
    ],
)
def test_errors_name_the_file_the_server_and_the_reason(
    servers: dict[str, object], message: str
) -> None:
    with pytest.raises(McpConfigError) as info:
        parse_mcp_config({"mcpServers": servers}, "conf/mcp.json", ENV)
    assert str(info.value).startswith("conf/mcp.json: ")
    assert message in str(info.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="no such file"):
        load_mcp_config(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {,}}')
    with pytest.raises(McpConfigError, match=r"broken.json: not valid JSON \(line 1"):
        load_mcp_config(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"servers": {}}')
    with pytest.raises(McpConfigError, match='expected an object with an "mcpServers" object'):
        load_mcp_config(wrong)
    extra = tmp_path / "extra.json"
    extra.write_text('{"mcpServers": {}, "other": 1}')
    with pytest.raises(McpConfigError, match="unknown top-level key"):
        load_mcp_config(extra)


def test_no_file_means_no_servers() -> None:
    assert load_mcp_config(None).servers == {}


def test_the_shipped_example_is_valid() -> None:
    from app.settings import PROJECT_ROOT

    environ = {"CRM_MCP_TOKEN": "example-token-value"}
    config = load_mcp_config(PROJECT_ROOT / "mcp_servers.example.json", environ)
    assert config.servers
