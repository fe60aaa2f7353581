"""Every setting's default is written once, in app/settings/groups.py.

Two checks read app/'s source: the config classes built from settings declare no default of
their own (only knobs that are not settings, listed below with why), and no parameter or field
anywhere else repeats a setting's default under the setting's name (`timeout_s: float = 60.0`
beside HERMES_LLM_TIMEOUT_S's 60), except the coincidences listed below with why. Code that
wants a default takes it from a settings group (`NluSettings().min_confidence`, `ToolSettings()`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator

from app.settings import GROUPS, PROJECT_ROOT, VARIABLES

APP = PROJECT_ROOT / "app"

# The classes whose fields are settings: each is built in one place from its settings group
# (`X.from_settings(...)`), so none may keep a default that could drift from the settings'.
CONFIG_CLASSES = {
    "BreakerPolicy",
    "WindowConfig",
    "ChainOptions",
    "DecayPolicy",
    "HandoffConfig",
    "LeaseConfig",
    "LocalModelConfig",
    "LoopLimits",
    "MaskingPolicy",
    "ReadLimits",
    "RetentionPolicy",
    "RetryPolicy",
    "TurnConfig",
    "ScoringConfig",
    "SmtpConfig",
    "TurnLimits",
}
# Their fields that are not settings, so their default is their only one.
NOT_SETTINGS = {
    "WindowConfig.summary_share": "the summary's share of the context budget, a tuned constant",
    "WindowConfig.stub_chars": "what an old tool result keeps when stubbed",
    "ChainOptions.breakers": "where breaker state lives: in this process unless Redis is given",
    "ChainOptions.masking": "no masking unless a policy is given (the service always gives one)",
    "DecayPolicy.recency_half_life_h": "recency's weight in recall scoring",
    "HandoffConfig.last_messages": "how many messages the desk shows with a queued handoff",
    "LocalModelConfig.chunk_chars": "the size of hermes/local's streamed pieces",
    "MaskingPolicy.secret": "a random key per process unless the deployment's secret is set",
    "RetryPolicy.jitter": "the random share added to a backoff",
    "ScoringConfig.thresholds": "per-fact-type thresholds over the one setting, for tests",
}
# Parameters and fields whose literal default equals a setting's of a similar name by chance.
COINCIDENCES = {
    "app/chat/client.py:timeout_s": "the terminal client's own request timeout",
    "app/demo/fixtures.py:minute": "a timestamp's minute",
    "app/demo/store.py:read_connections": "the demo file's readers, not the service database's",
    "app/demo/testing.py:timeout_s": "the test mail server's client",
    "app/llm/catalog.py:api": "the routing rule's own mode when a caller names none",
    "app/llm/testing.py:timeout_s": "a test double's gate",
    "app/memory/embeddings.py:timeout_s": "an embedding call's timeout, not a setting",
    "app/observability/metrics.py:cost": "a model call's cost when the caller has none",
    "app/runtime/parts.py:timeout_s": "the HTTP tools' client timeout (DESIGN.md: 8 s)",
    "app/storage/usage.py:tokens": "usage starts at nothing",
    "app/storage/usage.py:cost": "usage starts at nothing",
    "app/tools/spec.py:timeout_s": "a tool's timeout when tools.yaml gives none (DESIGN.md)",
}


@functools.cache
def _sources() -> tuple[tuple[str, ast.Module], ...]:
    """Every module of app/ but the settings themselves, parsed once."""
    return tuple(
        (str(path.relative_to(PROJECT_ROOT)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(APP.rglob("*.py"))
        if "settings" not in path.relative_to(APP).parts[:1]
    )


def _defaults(tree: ast.Module) -> Iterator[tuple[str, str, ast.expr]]:
    """(owner, name, default) for every parameter default and class-level field default."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(
                zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
            )
            pairs += [
                (a, d)
                for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                if d is not None
            ]
            for arg, default in pairs:
                yield node.name, arg.arg, default
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and statement.value is not None
                    and isinstance(statement.target, ast.Name)
                    and "ClassVar" not in ast.unparse(statement.annotation)
                ):
                    yield node.name, statement.target.id, statement.value


def _setting_defaults() -> dict[str, tuple[str, object]]:
    """Variable name -> (its field's name, its default), for plain-valued defaults."""
    found: dict[str, tuple[str, object]] = {}
    for name, (group, field) in VARIABLES.items():
        value = GROUPS[group].model_fields[field].get_default(call_default_factory=True)
        if isinstance(value, int | float | str):
            found[name] = (field, value)
    return found


def test_the_config_classes_declare_no_default_a_setting_has() -> None:
    classes, kept = set(), []
    for path, tree in _sources():
        classes |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        for owner, name, _ in _defaults(tree):
            if owner in CONFIG_CLASSES and f"{owner}.{name}" not in NOT_SETTINGS:
                kept.append(f"{path}: {owner}.{name}")
    assert kept == [], "build these from the settings (`from_settings`), not with a default"
    assert CONFIG_CLASSES - classes == set(), "a config class was renamed: rename it here too"


def test_no_literal_default_repeats_a_setting() -> None:
    settings = _setting_defaults()
    repeated = []
    for path, tree in _sources():
        for owner, name, default in _defaults(tree):
            try:
                value = ast.literal_eval(default)
            except ValueError:
                continue  # not a literal: taken from somewhere (a settings group, a constant)
            if f"{path}:{name}" in COINCIDENCES:
                continue
            for variable, (field, setting) in settings.items():
                same_kind = isinstance(value, bool) == isinstance(setting, bool)
                named = any(n.endswith(name) or name.endswith(n) for n in (variable, field))
                if same_kind and value == setting and named:
                    repeated.append(
                        f"{path}: {owner}({name}={value!r}) repeats HERMES_{variable.upper()}"
                    )
    assert repeated == [], "take the default from its settings group"


def test_the_listed_coincidences_still_exist() -> None:
    here = {f"{path}:{name}" for path, tree in _sources() for _, name, _ in _defaults(tree)}
    assert set(COINCIDENCES) - here == set(), "drop the entries that no longer apply"


def test_the_checks_see_a_repeated_default() -> None:
    tree = ast.parse("def call(*, llm_timeout_s: float = 60.0) -> None: ...")
    found = [(owner, name) for owner, name, _ in _defaults(tree)]
    assert found == [("call", "llm_timeout_s")]
    assert _setting_defaults()["llm_timeout_s"] == ("timeout_s", 60.0)
