"""The turn stays readable: in app/conversation/turn/ no function or method is over 60 lines,
and no class that holds collaborators (the pipeline, its opening, each stage) takes more than 7
in its constructor. A stage that needs more is two stages. Read with `ast`, like the layer test
(tests/test_layers.py)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import app.conversation.turn

PACKAGE = Path(app.conversation.turn.__file__).parent
MAX_LINES = 60
MAX_PARAMETERS = 7
# Plain data passed through the stages, not collaborators: their fields are not a constructor's
# dependencies.
DATA = {"TurnState", "TurnConfig"}


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function or method over MAX_LINES, decorators included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_LINES:
                found.append((node.name, lines))
    return found


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def constructors(source: str) -> dict[str, int]:
    """The number of constructor parameters of each class (its `__init__`'s without `self`, or
    a dataclass's fields)."""
    counts = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        init = next(
            (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
            None,
        )
        if init is not None:
            args = init.args
            counts[node.name] = len(args.posonlyargs + args.args + args.kwonlyargs) - 1
        elif _is_dataclass(node):
            counts[node.name] = sum(
                1
                for n in node.body
                if isinstance(n, ast.AnnAssign) and "ClassVar" not in ast.unparse(n.annotation)
            )
        else:
            counts[node.name] = 0
    return counts


def sources() -> dict[str, str]:
    return {p.name: p.read_text("utf-8") for p in sorted(PACKAGE.glob("*.py"))}


def test_no_function_of_the_turn_is_over_60_lines() -> None:
    too_long = {name: found for name, s in sources().items() if (found := long_functions(s))}
    assert too_long == {}


def test_no_collaborator_holder_of_the_turn_takes_over_7() -> None:
    counts = {
        cls: n for s in sources().values() for cls, n in constructors(s).items() if cls not in DATA
    }
    # It reads the real classes: the pipeline, its opening, and the stages.
    assert {"TurnPipeline", "TurnOpening", "Understand", "Complete", "HandoffNotice"} <= set(counts)
    assert {cls: n for cls, n in counts.items() if n > MAX_PARAMETERS} == {}


def test_the_checks_see_what_they_forbid() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert long_functions(f"async def long() -> None:\n{body}\n") == [("long", MAX_LINES + 1)]
    assert long_functions(f"def short() -> None:\n{body[: body.rindex(chr(10))]}\n") == []
    wide = textwrap.dedent(
        """
        from dataclasses import dataclass

        class Wide:
            def __init__(self, a, b, c, d, e, f, g, *, h): ...

        @dataclass(frozen=True)
        class Stage:
            a: int
            b: int
            names: ClassVar[str] = ""

            async def run(self, state): ...
        """
    )
    assert constructors(wide) == {"Wide": 8, "Stage": 2}
