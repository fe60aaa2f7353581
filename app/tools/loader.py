"""Load and check tools.yaml. A bad file stops start-up with the line and the reason."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema.validators import Draft202012Validator

from app.errors import ToolsFileError
from app.tools.deps import RUNTIME_GIVEN, Provider, dependency_of, type_name
from app.tools.meta_schema import META_SCHEMA
from app.tools.spec import (
    BusinessRule,
    Confirmation,
    Fallback,
    Handler,
    HistoryRule,
    HttpHandler,
    PythonHandler,
    ToolSpec,
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


# libyaml's loader parses tools.yaml ten times faster than the pure-Python one, when present.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _line_index(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each path in the document to the 1-based line where its value starts."""
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines.update(_line_index(value, (*path, key.value)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.update(_line_index(item, (*path, i)))
    return lines


def _line_of(lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def parse_handler(raw: dict[str, Any]) -> Handler:
    if "python" in raw:
        module, function = raw["python"].split(":", 1)
        return PythonHandler(module, function)
    http = raw["http"]
    return HttpHandler(http["method"], http["url"], dict(http.get("headers") or {}))


def _history_rule(raw: dict[str, Any]) -> HistoryRule:
    return HistoryRule(
        kind=raw["kind"],
        history=raw["history"],
        on_violation=raw["on_violation"],
        field=raw.get("field"),
        limit=raw.get("limit"),
        per=raw.get("per"),
        after=tuple(raw.get("after", ())),
        window_hours=raw.get("window_hours"),
        message=raw.get("message", ""),
    )


def _confirmation(raw: Any) -> Confirmation | None:
    if raw is None:
        return None
    if raw is True:
        return Confirmation()
    text = {lang: raw[lang] for lang in ("en", "zh")}
    return Confirmation(
        text=text,
        labels=raw.get("labels", {}),
        absent=raw.get("absent", {}),
        resolve=raw.get("resolve"),
    )


def _spec(raw: dict[str, Any], defaults: dict[str, Any]) -> ToolSpec:
    fallback = raw.get("fallback")
    return ToolSpec(
        name=raw["name"],
        description=raw["description"],
        parameters=raw["parameters"],
        handler=parse_handler(raw["handler"]),
        output_schema=raw.get("output_schema"),
        risk=raw["risk"],
        timeout_s=float(raw.get("timeout_s", defaults.get("timeout_s", 10.0))),
        rate_limit=float(raw.get("rate_limit", defaults.get("rate_limit", 5.0))),
        max_concurrency=int(raw.get("max_concurrency", defaults.get("max_concurrency", 4))),
        idempotent=bool(raw.get("idempotent", False)),
        business_rules=tuple(
            BusinessRule(
                kind=r["kind"],
                field=r["field"],
                on_violation=r["on_violation"],
                values=tuple(r.get("values", ())),
                limit=r.get("limit"),
                message=r.get("message", ""),
            )
            for r in raw.get("business_rules", ())
        ),
        history_rules=tuple(_history_rule(r) for r in raw.get("history_rules", ())),
        precheck=raw.get("precheck"),
        confirm=_confirmation(raw.get("confirm")),
        limits_scope=raw.get("limits_scope", defaults.get("limits_scope", "tenant")),
        untrusted_output=bool(raw.get("untrusted_output", False)),
        fallback=None
        if fallback is None
        else Fallback(fallback.get("data"), fallback.get("message")),
        intents=tuple(raw.get("intents", ())),
        always_on=bool(raw.get("always_on", False)),
        cpu_bound=bool(raw.get("cpu_bound", False)),
    )


@dataclass(frozen=True)
class ToolsFile:
    """tools.yaml as loaded: its tools and, by the type each gives, the providers of what
    their handlers need (both read only when the loader resolves the handlers)."""

    tools: list[ToolSpec]
    providers: dict[type, Provider[Any]]

    def needed(self) -> list[Provider[Any]]:
        """The providers some tool needs, in the file's order: the only ones to open."""
        used = {spec.dependency for spec in self.tools}
        return [provider for kind, provider in self.providers.items() if kind in used]


def load_tools(path: Path, *, resolve: Callable[[str], object] | None = None) -> list[ToolSpec]:
    return load_tools_file(path, resolve=resolve).tools


def load_tools_file(path: Path, *, resolve: Callable[[str], object] | None = None) -> ToolsFile:
    """Parse, check against the meta-schema, check each tool's own schemas and handler, and
    (with `resolve`) that a provider gives what each tool's functions need."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolsFileError(str(path), f"cannot read: {exc.strerror}") from None
    try:
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ToolsFileError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if node is None or data is None:
        raise ToolsFileError(f"{path}:1", "the file is empty")
    lines = _line_index(node)

    def fail(at: tuple[Any, ...], reason: str) -> ToolsFileError:
        return ToolsFileError(f"{path}:{_line_of(lines, at)}", reason)

    errors = sorted(
        Draft202012Validator(META_SCHEMA).iter_errors(data), key=lambda e: list(e.absolute_path)
    )
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        error_at = tuple(best.absolute_path)
        label = ".".join(str(p) for p in error_at) or "(top level)"
        raise fail(error_at, f"{label}: {best.message}")

    defaults = data.get("defaults") or {}
    providers = _providers(data.get("providers", ()), fail) if resolve is not None else {}
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["tools"]):
        at: tuple[Any, ...] = ("tools", i)
        if raw["name"] in seen:
            raise fail((*at, "name"), f"duplicate tool name {raw['name']!r}")
        seen.add(raw["name"])
        problem = _problem(raw)
        if problem is not None:
            raise fail((*at, *problem[0]), problem[1])
        spec = _spec(raw, defaults)
        if resolve is not None:
            targets: list[tuple[tuple[Any, ...], str, str]] = [
                (("history_rules", j, "history"), "history function", r.history)
                for j, r in enumerate(spec.history_rules)
            ]
            if spec.precheck is not None:
                targets.append((("precheck",), "precheck", spec.precheck))
            if spec.confirm is not None and spec.confirm.resolve is not None:
                targets.append((("confirm", "resolve"), "confirm resolver", spec.confirm.resolve))
            if isinstance(spec.handler, PythonHandler):
                targets.insert(0, (("handler",), "handler", spec.handler.target))
            needs: list[tuple[tuple[Any, ...], str, type]] = []
            for place, what, target in targets:
                try:
                    fn = resolve(target)
                except (ImportError, AttributeError, ValueError) as exc:
                    raise fail((*at, *place), f"{raw['name']}: {what} not found: {exc}") from None
                try:
                    kind = dependency_of(fn) if callable(fn) else None
                except ValueError as exc:
                    raise fail((*at, *place), f"{raw['name']}: {what}: {exc}") from None
                if kind is not None:
                    needs.append(((*at, *place), what, kind))
            if needs:
                spec = replace(spec, dependency=_dependency(raw["name"], needs, providers, fail))
        specs.append(spec)
    return ToolsFile(specs, providers)


def _providers(
    targets: list[str], fail: Callable[[tuple[Any, ...], str], ToolsFileError]
) -> dict[type, Provider[Any]]:
    providers: dict[type, Provider[Any]] = {}
    for i, target in enumerate(targets):
        try:
            provider = resolve_object(target)
        except (ImportError, AttributeError, ValueError) as exc:
            raise fail(("providers", i), f"provider not found: {exc}") from None
        if not isinstance(provider, Provider):
            raise fail(("providers", i), f"{target} is not an app.tools.deps.Provider")
        if provider.gives in providers:
            raise fail(("providers", i), f"a second provider of {type_name(provider.gives)}")
        providers[provider.gives] = provider
    return providers


def _dependency(
    name: str,
    needs: list[tuple[tuple[Any, ...], str, type]],
    providers: dict[type, Provider[Any]],
    fail: Callable[[tuple[Any, ...], str], ToolsFileError],
) -> type:
    """The one dependency of a tool: its handler, precheck and history readers get the same
    context, so those that need something must need the same thing, and a provider must
    give it."""
    at, what, kind = needs[0]
    for other_at, other_what, other in needs[1:]:
        if other is not kind:
            raise fail(
                other_at,
                f"{name}: its {other_what} needs {type_name(other)} but its {what} needs "
                f"{type_name(kind)}; a tool's functions share one context",
            )
    if kind not in providers and kind not in RUNTIME_GIVEN:
        raise fail(
            at,
            f"{name}: its {what} needs {type_name(kind)}, which no entry under `providers:` gives",
        )
    return kind


def _problem(raw: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    """What the meta-schema cannot see: schemas that are not JSON Schema, rules naming
    arguments the tool does not have. Returns where (below the tool) and why."""
    name = raw["name"]
    for key in ("parameters", "output_schema"):
        if key in raw:
            try:
                Draft202012Validator.check_schema(raw[key])
            except jsonschema.SchemaError as exc:
                return (key, *exc.absolute_path), (
                    f"{name}.{key} is not a valid JSON Schema: {exc.message}"
                )
    params = raw["parameters"]["properties"]
    for j, rule in enumerate(raw.get("business_rules", ())):
        if rule["field"] not in params:
            return ("business_rules", j), f"{name}: rule field {rule['field']!r} is not a parameter"
    for j, rule in enumerate(raw.get("history_rules", ())):
        named = [rule.get("field"), None if rule.get("per") == "customer" else rule.get("per")]
        for arg in filter(None, named):
            if arg not in params:
                return ("history_rules", j), (
                    f"{name}: history rule names {arg!r}, which is not a parameter"
                )
    confirm = raw.get("confirm")
    if isinstance(confirm, dict):
        for lang in ("en", "zh"):
            for arg in _PLACEHOLDER.findall(confirm[lang]):
                if arg not in params:
                    return ("confirm", lang), (
                        f"{name}: confirm text names {{{arg}}}, which is not a parameter"
                    )
        for arg in confirm.get("absent", {}):
            if arg not in params:
                return ("confirm", "absent"), (
                    f"{name}: confirm absent names {arg!r}, which is not a parameter"
                )
    return None


def resolve_object(target: str) -> object:
    module_name, _, attr = target.partition(":")
    found: object = getattr(importlib.import_module(module_name), attr)
    return found


def resolve_python(target: str) -> Callable[..., Any]:
    fn = resolve_object(target)
    if not callable(fn):
        raise ValueError(f"{target} is not callable")
    return fn
