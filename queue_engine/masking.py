"""Hide secrets before anything reaches a page, a diff or the admin.

Two rules find them. A key is secret when it contains one of CONSOLE_MASKED_KEYS
anywhere (`db_password`, `X-Api-Key`, `apikey`), or when one of its word parts is one of
CONSOLE_MASKED_KEY_PARTS: parts split at `_`, `-`, `.`, spaces, digits and camelCase
humps, so `pass` masks `db_pass`, `dbPass` and `pass` but not `passenger`, `bypass` or
`compass` (short words would match too much as plain substrings). The whole value of a
secret key is masked. Any other string, at any depth, keeps its text but loses the
password of every URL in it: `postgres://u:secret@h/db` reads `postgres://u:********@h/db`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from queue_engine.conf import option

MASK = "********"

# scheme://user:password@ ; the password stops at the first "@", "/" or blank.
URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*:)(?P<password>[^\s/@]+)(?=@)"
)
WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


@dataclass(frozen=True)
class Rule:
    words: tuple[str, ...]  # matched anywhere in a key, any case
    parts: frozenset[str]  # matched as a whole word part of a key, any case

    def is_secret(self, key: str) -> bool:
        lowered = key.lower()
        if any(word in lowered for word in self.words):
            return True
        return bool(self.parts) and any(p.lower() in self.parts for p in WORD_PARTS.findall(key))


def rule() -> Rule:
    return Rule(
        tuple(w.lower() for w in option("CONSOLE_MASKED_KEYS")),
        frozenset(w.lower() for w in option("CONSOLE_MASKED_KEY_PARTS")),
    )


def mask_text(text: str) -> str:
    """The text with the password of every URL in it masked."""
    return URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def mask(value: Any, secrets: Rule | None = None) -> Any:
    """A copy of a JSON value with every secret masked, at any depth."""
    if secrets is None:
        secrets = rule()
    if isinstance(value, dict):
        return {
            k: MASK if secrets.is_secret(str(k)) else mask(v, secrets) for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask(v, secrets) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def masked_key_in(value: Any, secrets: Rule | None = None, within: str = "") -> str | None:
    """The first key at any depth of a JSON value whose value the console masks, in whole
    or in part (a URL's password), or None."""
    if secrets is None:
        secrets = rule()
    if isinstance(value, str):
        return within if within and mask_text(value) != value else None
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(within, v) for v in value]
    for key, item in items:
        if key != within and secrets.is_secret(key):
            return key
        found = masked_key_in(item, secrets, key)
        if found is not None:
            return found
    return None


def restore(edited: Any, original: Any, secrets: Rule | None = None) -> Any:
    """An edited copy of a masked value, with what the editor left masked taken back from
    `original`: a secret key still reading MASK gets its original value, and a string left
    exactly as shown (a URL with its password masked) gets its original text. Anything
    typed anew stays as typed. List items pair with an original item that masks to the
    same thing, else with the original item at the same place."""
    if secrets is None:
        secrets = rule()
    if isinstance(edited, dict) and isinstance(original, dict):
        return {
            k: _restore_at(str(k), v, original, secrets) if k in original else v
            for k, v in edited.items()
        }
    if isinstance(edited, list) and isinstance(original, list):
        unused = list(range(len(original)))
        paired: list[Any] = []
        for place, item in enumerate(edited):
            same = [i for i in unused if mask(original[i], secrets) == item]
            index = same[0] if same else (place if place in unused else None)
            if index is None:
                paired.append(item)
                continue
            unused.remove(index)
            paired.append(restore(item, original[index], secrets))
        return paired
    if isinstance(edited, str) and isinstance(original, str) and edited == mask_text(original):
        return original
    return edited


def take_back(edited: Any, original: Any, owner: str) -> Any:
    """`restore`, refusing (ValueError, one sentence) a mask left where `owner`, what the
    original belongs to, has no value to give back."""
    restored = restore(edited, original)
    where = left_masked(restored)
    if where is not None:
        raise ValueError(
            f"The payload still reads {MASK} at {where}, where {owner} has no value to "
            "keep: type the value, or remove the key."
        )
    return restored


def _restore_at(key: str, edited: Any, original: dict[Any, Any], secrets: Rule) -> Any:
    if secrets.is_secret(key):
        return original[key] if edited == MASK else edited
    return restore(edited, original[key], secrets)


def left_masked(value: Any, secrets: Rule | None = None, within: str = "") -> str | None:
    """Where a value still holds a mask the editor could not give back (a secret key or
    URL password with nothing to restore it from), as a path; None if nowhere."""
    if secrets is None:
        secrets = rule()
    if isinstance(value, str):
        masked_url = any(m.group("password") == MASK for m in URL_PASSWORD.finditer(value))
        return within or "the payload" if masked_url else None
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = [(f"{within}.{k}" if within else str(k), v) for k, v in value.items()]
        for (path, item), key in zip(items, value, strict=True):
            if secrets.is_secret(str(key)) and item == MASK:
                return path
    elif isinstance(value, list):
        items = [(f"{within}[{i}]", v) for i, v in enumerate(value)]
    for path, item in items:
        found = left_masked(item, secrets, path)
        if found is not None:
            return found
    return None


def hidden_changes(old: Any, new: Any, secrets: Rule | None = None, within: str = "") -> list[str]:
    """The paths where `old` and `new` differ only in what masking hides (a secret key's
    value, a URL's password): a masked diff cannot show those changes, so they are named."""
    if secrets is None:
        secrets = rule()
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in old.keys() & new.keys():
            path = f"{within}.{key}" if within else str(key)
            if secrets.is_secret(str(key)):
                found += [path] if old[key] != new[key] else []
            else:
                found += hidden_changes(old[key], new[key], secrets, path)
        return sorted(found)
    if isinstance(old, list) and isinstance(new, list):
        return [
            path
            for i, (a, b) in enumerate(zip(old, new, strict=False))
            for path in hidden_changes(a, b, secrets, f"{within}[{i}]")
        ]
    if mask(old, secrets) == mask(new, secrets):
        return [within]
    return []
