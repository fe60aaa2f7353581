"""All tools the model may call, from every source (tools.yaml, MCP servers), by name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.tools.handlers import Runner
from app.tools.spec import ToolSpec


@dataclass
class RegisteredTool:
    spec: ToolSpec
    run: Runner
    # False while an operator has to re-approve a changed definition (MCP tool poisoning).
    offered: bool = True
    blocked_reason: str | None = None


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}

    def register(self, spec: ToolSpec, run: Runner, *, offered: bool = True) -> None:
        existing = self._tools.get(spec.name)
        if existing is not None and existing.spec.source != spec.source:
            raise ValueError(
                f"tool {spec.name!r} from {spec.source} clashes with one from "
                f"{existing.spec.source}"
            )
        self._tools[spec.name] = RegisteredTool(spec, run, offered)

    def remove_source(self, source: str, keep: Iterable[str] = ()) -> list[str]:
        keep_set = set(keep)
        gone = [n for n, t in self._tools.items() if t.spec.source == source and n not in keep_set]
        for name in gone:
            del self._tools[name]
        return gone

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def all(self) -> list[RegisteredTool]:
        return [self._tools[n] for n in sorted(self._tools)]

    def offered(self, names: Iterable[str] | None = None) -> list[ToolSpec]:
        chosen = (
            self._tools.values()
            if names is None
            else (self._tools[n] for n in names if n in self._tools)
        )
        return [t.spec for t in chosen if t.offered]
