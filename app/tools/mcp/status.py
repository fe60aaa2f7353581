"""What the operator API shows of an MCP server, in two views.

`summary` is for any operator: health and which tools are offered, nothing of how the server is
reached (command, URL, env, headers), no fingerprints, and the last error without URLs, the
server's command line or its stderr. `detail` is for admins: where the server is (secrets
masked), fingerprints, and who approved each tool's definition, for which tenant, when.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from app.tools.mcp.config import StdioTarget
from app.tools.mcp.connection import ServerConnection
from app.tools.mcp.secrets import MASK, SecretMasker
from app.tools.mcp.store import ApprovedDefinition

if TYPE_CHECKING:
    from app.tools.mcp.manager import ToolEntry

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://\S+")
_MIN_MASKED_PART = 4  # shorter command-line parts ("-m", "-v") would mask ordinary words


def summary(
    conn: ServerConnection, entries: Iterable[ToolEntry], masker: SecretMasker
) -> dict[str, Any]:
    tools = list(entries)
    return {
        "name": conn.name,
        "state": conn.state.value,
        "trusted": conn.config.trusted,
        "tool_count": sum(1 for e in tools if e.offered),
        "tools": [
            {
                "tool": e.tool,
                "name": e.name,
                "offered": e.offered,
                "blocked_reason": e.blocked_reason,
            }
            for e in tools
        ],
        "last_error": plain_error(conn, masker),
    }


def detail(
    conn: ServerConnection,
    entries: Iterable[ToolEntry],
    approved: dict[str, ApprovedDefinition],
    masker: SecretMasker,
) -> dict[str, Any]:
    tools = list(entries)
    return {
        "name": conn.name,
        "transport": conn.config.transport,
        "target": conn.config.display_target(masker),
        "trusted": conn.config.trusted,
        "state": conn.state.value,
        "protocol_version": conn.protocol_version,
        "server_info": conn.server_info,
        "tool_count": sum(1 for e in tools if e.offered),
        "tools": [
            {
                "tool": e.tool,
                "name": e.name,
                "offered": e.offered,
                "blocked_reason": e.blocked_reason,
                "fingerprint": e.definition.fingerprint(),
                **_approval(approved.get(e.tool)),
            }
            for e in tools
        ],
        "last_error": None if conn.last_error is None else masker.mask(conn.last_error),
        "latency_p50_ms": conn.latencies.p50_ms(),
        "calls": conn.latencies.count,
        "connected_at": conn.connected_at,
        "retries": conn.retries,
        "breaker": conn.breaker.snapshot(),
    }


def plain_error(conn: ServerConnection, masker: SecretMasker) -> str | None:
    """The last error as any operator may read it."""
    if conn.last_error is None:
        return None
    # A crashed server's stderr tail can hold anything (paths, tokens it printed): dropped.
    text = masker.mask(conn.last_error.split(" (stderr: ", 1)[0])
    target = conn.config.target
    parts = [target.command, *target.args] if isinstance(target, StdioTarget) else [target.url]
    for part in sorted(parts, key=len, reverse=True):
        if len(part) >= _MIN_MASKED_PART:
            text = text.replace(part, MASK)
    return _URL.sub(MASK, text)


def _approval(pinned: ApprovedDefinition | None) -> dict[str, Any]:
    if pinned is None:
        return {"approved_by": None, "approved_by_tenant": None, "approved_at": None}
    return {
        "approved_by": pinned.approved_by,
        "approved_by_tenant": pinned.approved_by_tenant,
        "approved_at": pinned.approved_at,
    }
