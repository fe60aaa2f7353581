"""A scriptable MCP server for tests, run as a subprocess over stdio or streamable HTTP.

    python scripted_server.py                       # stdio
    python scripted_server.py --http --port 8123    # streamable HTTP on 127.0.0.1:8123/mcp
    python scripted_server.py --sse --port 8123     # legacy HTTP+SSE on 127.0.0.1:8123/sse

Over HTTP it prints `listening on <url>` on stdout once it accepts connections (`--port 0`
picks a free port).

Besides ordinary tools (`echo`, `add`, `get_env`, `pid`), it misbehaves on command: `crash`
exits the process in the middle of a call, `hang` never answers, `add_tool` / `remove_tool`
/ `set_description` change the tool list and announce it, and `odd` returns unusual results
(images, resources, whitespace, error results, structured content that breaks its schema).
`--description-suffix` changes `echo`'s description from the start, as a poisoned update
would look after a restart.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

ECHO_DESCRIPTION = "Echo the given text back."


def build(description_suffix: str = "") -> MCPServer:
    server = MCPServer("scripted", version="1.0")
    hung = anyio.Event()  # never set: `hang` waits on it forever

    def echo(text: str) -> str:
        return text

    server.add_tool(
        echo,
        description=ECHO_DESCRIPTION + description_suffix,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )

    @server.tool(description="Add two integers.", structured_output=True)
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    @server.tool(description="The value of an environment variable in the server process.")
    def get_env(name: str) -> str:
        return os.environ.get(name, "<unset>")

    @server.tool(description="The server's process id.")
    def pid() -> int:
        return os.getpid()

    @server.tool(description="Exit the server process in the middle of this call.")
    async def crash(code: int = 1) -> str:
        sys.stdout.flush()
        os._exit(code)

    @server.tool(description="Never answer.")
    async def hang() -> str:
        await hung.wait()
        return "unreachable"

    async def announce(ctx: Context) -> None:
        # 2026-07-28 clients hear this through subscriptions/listen; older ones through a
        # notification on the session.
        await ctx.notify_tools_changed()
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:
            pass

    @server.tool(description="Add a tool named `name` that returns `reply`, and announce it.")
    async def add_tool(name: str, ctx: Context, reply: str = "added") -> str:
        def added() -> str:
            return reply

        server.add_tool(added, name=name, description=f"A tool added at run time ({name}).")
        await announce(ctx)
        return "ok"

    @server.tool(description="Remove the tool named `name`, and announce it.")
    async def remove_tool(name: str, ctx: Context) -> str:
        server.remove_tool(name)
        await announce(ctx)
        return "ok"

    @server.tool(description="Change the description of `echo`, and announce it.")
    async def set_description(description: str, ctx: Context) -> str:
        server.remove_tool("echo")
        server.add_tool(
            echo,
            description=description,
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        await announce(ctx)
        return "ok"

    @server.tool(description="Return an unusual result of the given kind.")
    def odd(kind: str) -> CallToolResult:
        return _odd(kind)

    @server.tool(
        description="Structured output that breaks its own schema.", structured_output=True
    )
    def bad_structured() -> dict[str, int]:
        return {"sum": 1}

    return server


def _odd(kind: str) -> CallToolResult:
    text = TextContent
    match kind:
        case "whitespace":
            return CallToolResult(content=[text(text="  \n padded answer \t\n ")])
        case "multi":
            return CallToolResult(content=[text(text="first "), text(text="  second")])
        case "image":
            data = base64.b64encode(b"\x89PNG fake image bytes").decode()
            return CallToolResult(
                content=[text(text="a chart:"), ImageContent(data=data, mime_type="image/png")]
            )
        case "resource":
            return CallToolResult(
                content=[
                    EmbeddedResource(
                        resource=TextResourceContents(
                            uri="file:///notes.txt", mime_type="text/plain", text="inline notes"
                        )
                    ),
                    EmbeddedResource(
                        resource=BlobResourceContents(
                            uri="file:///blob.bin",
                            mime_type="application/octet-stream",
                            blob="AAAA",
                        )
                    ),
                    ResourceLink(uri="https://example.com/doc", name="doc"),
                ]
            )
        case "empty":
            return CallToolResult(content=[])
        case "error":
            message = "  the order does not exist  "
            return CallToolResult(content=[text(text=message)], is_error=True)
        case "structured":
            return CallToolResult(
                content=[text(text="ignored text")], structured_content={"order": "A1", "total": 3}
            )
        case "json_text":
            return CallToolResult(content=[text(text=' {"order": "A1"} ')])
        case _:
            return CallToolResult(content=[text(text=f"unknown kind {kind}")], is_error=True)


def _break_schema(server: MCPServer) -> None:
    """Make `bad_structured` return a string where its schema promises an integer."""
    tool: Any = server._tool_manager.get_tool("bad_structured")
    original = tool.fn

    def broken() -> Any:
        original()
        return CallToolResult(content=[], structured_content={"sum": "not a number"})

    tool.fn = broken
    tool.fn_metadata.output_model = None  # let the raw result through unvalidated


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--sse", action="store_true", help="the legacy HTTP+SSE transport")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--description-suffix", default="")
    args = parser.parse_args(argv)
    server = build(args.description_suffix)
    _break_schema(server)
    if args.http or args.sse:
        anyio.run(_serve_http, server, args.port, args.sse)
    else:
        anyio.run(server.run_stdio_async)


async def _serve_http(server: MCPServer, port: int, sse: bool) -> None:
    import uvicorn

    class Web(uvicorn.Server):
        ready = anyio.Event()

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            self.ready.set()

    if sse:
        app, path = server.sse_app(host="127.0.0.1"), "sse"
    else:
        app, path = server.streamable_http_app(host="127.0.0.1"), "mcp"
    web = Web(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        await web.ready.wait()
        bound = web.servers[0].sockets[0].getsockname()[1]
        # The parent reads this line to know the server is up, and where.
        print(f"listening on http://127.0.0.1:{bound}/{path}", flush=True)


if __name__ == "__main__":
    main()
