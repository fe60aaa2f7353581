"""What a deployment gives its tools: one dependency per tool, found by type.

A handler names what it needs in the type of its context and reads it typed:

    async def query_order_status(ctx: ToolContext[ShopBackend], order_id: str) -> dict: ...
        order = await ctx.deps.store.order_for(...)

The deployment says how each such type is opened with a `Provider`, listed once under
`providers:` in tools.yaml. The loader reads every tool's type when it resolves the handler
(and the tool's precheck and history readers, which get the same context), and stops start-up
when no provider gives it; the runtime opens only the providers some configured tool needs,
for its whole life, and the executor hands each call its tool's dependency. Nothing here knows
any particular backend: the demo shop (app/demo/backend.py) is one provider among others.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, get_args, get_origin, get_type_hints

from app.errors import ConfigError
from app.knowledge.passages import KnowledgeSearch
from app.settings import Settings
from app.tools.context import ToolContext
from app.tools.spec import ToolSpec

log = logging.getLogger(__name__)

# What the runtime gives tools itself, from its own parts, with no entry under `providers:`:
# the tenants' knowledge base (the built-in `search_knowledge` tool).
RUNTIME_GIVEN: frozenset[type] = frozenset({KnowledgeSearch})

T = TypeVar("T")


@dataclass(frozen=True)
class Provider(Generic[T]):
    """How a deployment opens the dependency `gives` (the type handlers name in
    `ToolContext[...]`): `open(settings)` is an async context manager that yields it for the
    runtime's life and closes it at shutdown."""

    gives: type[T]
    open: Callable[[Settings], AbstractAsyncContextManager[T]]


def type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def dependency_of(fn: Callable[..., object]) -> type | None:
    """The type `fn` names in its first parameter's `ToolContext[...]`; None when it needs
    nothing (`ToolContext[None]`, a bare `ToolContext`, `Any`, or no annotation). Raises
    ValueError when the annotation cannot be read."""
    target = inspect.unwrap(fn)
    try:
        first = next(iter(inspect.signature(target).parameters.values()), None)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing declared
    if first is None or first.annotation is inspect.Parameter.empty:
        return None
    annotation = first.annotation
    if isinstance(annotation, str):  # `from __future__ import annotations`
        annotation = _evaluate(annotation, target)
    if get_origin(annotation) is not ToolContext:
        return None
    (kind,) = get_args(annotation)
    if kind is None or kind is type(None) or kind is Any:
        return None
    if not isinstance(kind, type):
        raise ValueError(f"ToolContext[{kind!r}]: the dependency must be a class")
    return kind


def _evaluate(annotation: str, fn: Callable[..., object]) -> Any:
    """The first parameter's annotation alone, resolved in `fn`'s module (the others may name
    types imported only for type checking)."""

    def probe() -> None: ...

    probe.__annotations__ = {"ctx": annotation}
    namespace = getattr(fn, "__globals__", None)
    if namespace is None:
        module = sys.modules.get(getattr(fn, "__module__", ""), None)
        namespace = vars(module) if module is not None else {}
    try:
        return get_type_hints(probe, globalns=namespace)["ctx"]
    except Exception as exc:
        raise ValueError(
            f"the type of its context ({annotation}) cannot be read: {exc}; import the "
            "dependency's type at module level"
        ) from None


class Dependencies:
    """The deployment's dependencies as opened, by the type handlers ask for."""

    def __init__(self, provided: Mapping[type, object] | None = None) -> None:
        self._provided = dict(provided or {})

    def adding(self, given: Mapping[type, object]) -> Dependencies:
        """These, and what the runtime gives itself (RUNTIME_GIVEN) from its own parts."""
        return Dependencies({**self._provided, **given})

    def __contains__(self, kind: type) -> bool:
        return kind in self._provided

    def for_tool(self, spec: ToolSpec) -> Any:
        return None if spec.dependency is None else self._provided[spec.dependency]

    def check(self, specs: Iterable[ToolSpec]) -> None:
        """Stop start-up when a tool needs what nothing provides (not at its first call)."""
        for spec in specs:
            if spec.dependency is not None and spec.dependency not in self:
                raise ConfigError(
                    f"tool {spec.name}",
                    f"needs {type_name(spec.dependency)}, which this deployment does not "
                    "provide (list its provider under `providers:` in tools.yaml)",
                )


@contextlib.asynccontextmanager
async def open_dependencies(
    providers: Iterable[Provider[Any]], settings: Settings
) -> AsyncIterator[Dependencies]:
    """Open `providers` in order (closed in reverse when the block ends): give it only the
    providers some configured tool needs, so an unused backend is never opened."""
    async with contextlib.AsyncExitStack() as stack:
        opened: dict[type, object] = {}
        for provider in providers:
            opened[provider.gives] = await stack.enter_async_context(provider.open(settings))
            log.info("opened %s for the tools", type_name(provider.gives))
        yield Dependencies(opened)
