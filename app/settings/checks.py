"""Value checks the settings groups share: comma lists, blanks, names from a closed set,
prices. Plain functions, so a group reuses one with `field_validator(...)(check)`."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

# HERMES_MODEL_MASKING's modes and the kinds of value it covers (app.llm.pseudonyms).
MASKING_MODES = ("off", "mask", "pseudonymise")
MASKING_KINDS = ("phone", "email", "id_card", "bank_card")

# HERMES_PUBLIC_PATHS' names: the routes that need no key only when listed.
PUBLIC_PATH_NAMES = ("healthz", "metrics", "docs", "openapi.json", "redoc")


def split_commas(value: Any) -> Any:
    """`"a, b ,"` -> `["a", "b"]`: a comma list as the environment gives it."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def blank_is_none(value: Any) -> Any:
    """`HERMES_X=` (compose's `${VAR:-}`) means unset, not an empty value."""
    return None if value == "" else value


def only(value: list[str], known: tuple[str, ...], what: str = "") -> list[str]:
    """`value` if each of its entries is `known`; else a ValueError naming the first that isn't."""
    unknown = [entry for entry in value if entry not in known]
    if unknown:
        label = f"{what} " if what else ""
        raise ValueError(f"unknown {label}{unknown[0]!r} (any of {', '.join(known)})")
    return value


def regular_expressions(value: list[str]) -> list[str]:
    """`value` if each entry compiles as a regular expression; else a ValueError naming it."""
    for entry in value:
        try:
            re.compile(entry)
        except re.error as exc:
            raise ValueError(f"{entry!r} is not a regular expression: {exc}") from None
    return value


def price(entry: str) -> tuple[str, tuple[float, float]]:
    """`"model=prompt/completion"` -> (model, (prompt, completion)), USD per million tokens."""
    model, sep, prices = entry.rpartition("=")
    prompt, slash, completion = prices.partition("/")
    try:
        pair = (float(prompt), float(completion))
    except ValueError:
        pair = (-1.0, -1.0)
    if not sep or not model.strip() or not slash or not all(0 <= p < 1e6 for p in pair):
        raise ValueError(
            f"each price must be 'model=prompt/completion' in USD per million tokens, got {entry!r}"
        )
    return model.strip(), pair


def loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.1, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
