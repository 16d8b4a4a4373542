"""Hide the values of secret-looking keys before anything reaches a page or a diff."""

from __future__ import annotations

from typing import Any

from queue_engine.conf import option

MASK = "********"


def masked_words() -> list[str]:
    return [w.lower() for w in option("CONSOLE_MASKED_KEYS")]


def is_secret(key: str, words: list[str]) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in words)


def mask(value: Any, words: list[str] | None = None) -> Any:
    """A copy of a JSON value with the value of every secret-looking key replaced, at any depth."""
    if words is None:
        words = masked_words()
    if isinstance(value, dict):
        return {k: MASK if is_secret(str(k), words) else mask(v, words) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, words) for v in value]
    return value


def masked_key_in(value: Any, words: list[str] | None = None) -> str | None:
    """The first key at any depth of a JSON value whose value the console masks, or None."""
    if words is None:
        words = masked_words()
    if isinstance(value, dict):
        for key, item in value.items():
            if is_secret(str(key), words):
                return str(key)
            found = masked_key_in(item, words)
            if found is not None:
                return found
    if isinstance(value, list):
        for item in value:
            found = masked_key_in(item, words)
            if found is not None:
                return found
    return None
