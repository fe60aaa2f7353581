"""One error family: every exception Hermes defines is a `HermesError`, the base module sits
at the bottom of the layers, and every error has an answer in the API's one table."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import app
from app import errors
from app.api.errors import INTERNAL, WIRE, wire_for

# Modules that need an optional extra to import (training) are skipped, not failed.
_OPTIONAL = ("app.nlu.train", "app.nlu.datagen")


def _app_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(app.__path__, "app."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            if info.name in _OPTIONAL:
                continue
            raise
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


EXCEPTIONS = _app_exceptions()


def test_the_walk_finds_errors_outside_app_errors() -> None:
    modules = {e.__module__ for e in EXCEPTIONS}
    assert {"app.errors", "app.llm.failures", "app.demo.errors"} <= modules


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_every_exception_in_app_is_a_hermes_error(error: type[BaseException]) -> None:
    assert issubclass(error, errors.HermesError)


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_every_error_has_an_answer_in_the_api_table(error: type[BaseException]) -> None:
    if error is errors.HermesError:
        return  # the base is never raised itself (the handler would answer INTERNAL)
    assert wire_for(error) is not None, f"add {error.__name__} (or a base) to app.api.errors.WIRE"


def test_errors_defined_outside_app_errors_are_internal_or_extend_one_there() -> None:
    for error in EXCEPTIONS:
        if error.__module__ == "app.errors":
            continue
        base = next(b for b in error.__mro__[1:] if b.__module__ == "app.errors")
        assert base is not errors.HermesError, f"{error.__name__} needs a family in app.errors"


def test_the_table_holds_only_hermes_errors_and_no_status_lives_on_them() -> None:
    assert all(issubclass(kind, errors.HermesError) for kind in WIRE)
    for error in EXCEPTIONS:
        assert "status" not in vars(error), f"{error.__name__} carries an HTTP status"


def test_app_errors_imports_nothing_from_app() -> None:
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf-8"))
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported.append("." * node.level + (node.module or ""))
    assert not [m for m in imported if m == "app" or m.startswith(("app.", "."))]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (errors.SessionNotFound("x"), 404, "session_not_found"),
        (errors.InvalidCursor(), 422, "validation_error"),
        (errors.SessionBusy("x"), 409, "session_busy"),
        (errors.StepQueueFull("x"), 429, "step_queue_full"),
        (errors.NLUUnavailable("x"), 503, "nlu_unavailable"),
        (errors.UpstreamLLMError("x", code="llm_no_api_key"), 502, "llm_no_api_key"),
        (errors.TurnFailed.of("llm_unavailable", "x"), 502, "llm_unavailable"),
        (errors.TurnFailed.of("turn_timeout", "x"), 504, "turn_timeout"),
        (errors.TurnFailed.of("llm_timeout", "x"), 504, "llm_timeout"),
        (errors.TurnFailed.of("cancelled", "x"), 503, "cancelled"),
        (errors.TurnFailed.of("session_deleted", "x"), 410, "session_deleted"),
    ],
)
def test_status_and_code_of_caller_errors(
    error: errors.HermesError, status: int, code: str
) -> None:
    wire = wire_for(type(error))
    assert wire is not None and wire.code is None
    assert (wire.status, error.code) == (status, code)


@pytest.mark.parametrize(
    "error",
    [
        errors.ConfigError("HERMES_MODEL", "bad"),
        errors.DatabaseClosed("database is closed"),
        errors.ToolHandlerError("order_not_found", "no such order"),
    ],
)
def test_faults_answer_as_internal_errors(error: errors.HermesError) -> None:
    assert wire_for(type(error)) is INTERNAL


def test_a_config_error_names_its_source_first() -> None:
    error = errors.ModelConfigError("HERMES_MODEL", "unknown model 'x'")
    assert isinstance(error, errors.ConfigError)
    assert (error.source, str(error)) == ("HERMES_MODEL", "HERMES_MODEL: unknown model 'x'")
