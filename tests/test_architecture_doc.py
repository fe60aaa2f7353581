"""docs/architecture.md names real code: every participant of its sequence diagram, every call
on an arrow, and every function or class it names in backticks exists. Renaming a function
the page names fails here, not in a reader's head."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"

# `%% Alias: app.module.Thing` under the diagram: what each participant is in the code.
_ALIAS = re.compile(r"^\s*%% (\w+): (app(?:\.\w+)+)\s*$", re.M)
# `A->>B: name(...)`: a call of `name` on B (a module's function or a class's method).
_ARROW = re.compile(r"^\s*(\w+)-{1,2}>>(\w+): ([A-Za-z_]\w*)\(", re.M)
# `Thing`, `Thing.attr`, `app.module.thing` in backticks.
_NAMED = re.compile(r"`((?:app\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`")


def resolve(dotted: str) -> Any:
    """The object `app.pkg.module.Class.attr` names (ImportError / AttributeError if none)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


def _text() -> str:
    return DOC.read_text("utf-8")


def _participants() -> dict[str, Any]:
    return {alias: resolve(path) for alias, path in _ALIAS.findall(_text())}


def test_every_participant_of_the_diagram_is_real_code() -> None:
    found = _ALIAS.findall(_text())
    assert len(found) >= 15, "the diagram lost its participants' code names"
    for _alias, path in found:
        resolve(path)  # raises, naming the path, when it is gone


def test_every_call_on_an_arrow_exists_on_its_target() -> None:
    participants = _participants()
    calls = _ARROW.findall(_text())
    assert len(calls) >= 25, "the diagram lost its calls"
    missing = []
    for _source, target, name in calls:
        owner = participants.get(target)
        if owner is None:  # the client: not code of ours
            continue
        if getattr(owner, "__name__", None) == name:  # a constructor
            continue
        if not hasattr(owner, name):
            missing.append(f"{target} ({getattr(owner, '__name__', owner)}) has no {name}")
    assert missing == []


def test_every_name_in_backticks_that_looks_like_code_exists() -> None:
    participants = _participants()
    by_name: dict[str, Any] = {
        getattr(obj, "__name__", alias): obj for alias, obj in participants.items()
    }
    checked, missing = 0, []
    for named in _NAMED.findall(_text()):
        head, _, rest = named.partition(".")
        try:
            if named.startswith("app."):
                resolve(named)
            elif head in by_name and rest:
                obj: Any = by_name[head]
                for part in rest.split("."):
                    obj = getattr(obj, part)
            else:
                continue  # a word, a file name, a header: not a code reference we can check
        except (ImportError, AttributeError):
            missing.append(named)
        checked += 1
    assert checked >= 20, "the page stopped naming code in backticks"
    assert missing == []


def test_the_checker_notices_a_name_that_is_gone() -> None:
    try:
        resolve("app.conversation.turn.pipeline.TurnPipeline.no_such_method")
    except AttributeError:
        pass
    else:
        raise AssertionError("a missing attribute resolved")
    assert isinstance(resolve("app.conversation.turn.pipeline"), ModuleType)
