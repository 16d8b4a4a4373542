"""JSON payloads and results: serialise once, and say exactly what cannot survive the trip."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from queue_engine.exceptions import PayloadError

# One encoder for every call: json.dumps with options builds a new one each time.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def dump_json(value: Any, *, what: str, max_bytes: int | None = None) -> str:
    """Serialise `value`, refusing anything JSON would drop or change (tuples become lists)."""
    if value is None:
        return "null"  # what most handlers return: no encoder, no checks
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError):
        raise PayloadError(f"{what} {explain(value)}") from None
    # json.dumps silently turns tuples into lists and non-string keys into strings;
    # a flat object of strings, numbers, booleans and nulls cannot hide either.
    if not is_flat(value) and json.loads(text) != value:
        problem = first_change(value, "")
        if problem is not None:
            raise PayloadError(f"{what} {problem}")
    # Postgres stores no NUL in text or jsonb, and UTF-8 has no lone surrogates: both
    # would fail at the INSERT, inside the caller's transaction. JSON writes a NUL as
    # \u0000; a string of backslash-u-0000 also matches, so only a found NUL is refused.
    if "\\u0000" in text:
        where = first_bad_text(value, "", has_nul)
        if where is not None:
            raise PayloadError(f"{what} {NUL_PROBLEM.format(where=where)}")
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode())
        except UnicodeEncodeError:
            where = first_bad_text(value, "", has_surrogate) or "somewhere"
            raise PayloadError(f"{what} {SURROGATE_PROBLEM.format(where=where)}") from None
    if max_bytes is not None and size > max_bytes:
        raise PayloadError(
            f"{what} is {size:,} bytes of JSON, over the limit of {max_bytes:,} "
            "(QUEUE_ENGINE['MAX_PAYLOAD_BYTES']); store large data elsewhere and pass a "
            "reference to it."
        )
    return text


NUL_PROBLEM = (
    "has a NUL character (\\x00) {where}, which Postgres cannot store; remove it, or "
    "encode binary data (for example as base64)."
)
SURROGATE_PROBLEM = (
    "has a lone surrogate character {where}, which is not valid Unicode; decode the text "
    "it came from with errors='replace', or remove the character."
)


def storable(text: str) -> str:
    """`text` as Postgres can store it: a NUL shown as the four characters \\x00, and a
    lone surrogate as its \\udXXX escape. For text the engine records as it came (error
    messages, tracebacks, log lines, progress messages), where refusing is no option."""
    if text.isascii():
        return text.replace("\x00", "\\x00") if "\x00" in text else text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def has_nul(text: str) -> bool:
    return "\x00" in text


def has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def text_problem(text: str) -> str | None:
    """Why Postgres cannot store the string `text` (a name, key or label), or None:
    ends a sentence that starts with what the text is."""
    if has_nul(text):
        return NUL_PROBLEM.format(where="in it")
    if has_surrogate(text):
        return SURROGATE_PROBLEM.format(where="in it")
    return None


def first_bad_text(value: Any, path: str, bad: Callable[[str], bool]) -> str | None:
    """Where the first string (a value or a key) for which `bad` holds is, or None."""
    match value:
        case str():
            if bad(value):
                return f"at {path!r}" if path else "at the top level"
        case dict():
            for key, item in value.items():
                inner = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and bad(key):
                    return f"in the key {key!r} at {path!r}" if path else f"in the key {key!r}"
                found = first_bad_text(item, inner, bad)
                if found:
                    return found
        case list() | tuple():
            for index, item in enumerate(value):
                found = first_bad_text(item, f"{path}[{index}]", bad)
                if found:
                    return found
    return None


SCALARS = (str, int, float, bool, type(None))


def is_flat(value: Any) -> bool:
    if not isinstance(value, dict):
        return isinstance(value, SCALARS)
    for key, item in value.items():
        if type(key) is not str or not isinstance(item, SCALARS):
            return False
    return True


def explain(value: Any) -> str:
    """Why `value` is not JSON: the path of the first bad value and what to do."""
    problem = first_change(value, "")
    return problem or "cannot be serialised as JSON."


def first_change(value: Any, path: str) -> str | None:
    where = f"at {path!r}" if path else "at the top level"
    match value:
        case bool() | int() | str() | None:
            return None
        case float():
            if math.isnan(value) or math.isinf(value):
                return f"has {value!r} {where}; JSON has no NaN or infinity, use null or a string."
            return None
        case dict():
            for key, item in value.items():
                if not isinstance(key, str):
                    return (
                        f"has a {type(key).__name__} key {key!r} {where}; JSON object keys are "
                        "strings, so convert the key to a string yourself."
                    )
                found = first_change(item, f"{path}.{key}" if path else key)
                if found:
                    return found
            return None
        case list() | tuple():
            for index, item in enumerate(value):
                found = first_change(item, f"{path}[{index}]")
                if found:
                    return found
            return None
    hint = HINTS.get(type(value).__name__, "convert it to a string, number, list or dict")
    return f"has a {type(value).__name__} {where}, which is not JSON; {hint}."


HINTS = {
    "datetime": "pass value.isoformat() and parse it in the handler",
    "date": "pass value.isoformat() and parse it in the handler",
    "time": "pass value.isoformat() and parse it in the handler",
    "timedelta": "pass value.total_seconds()",
    "Decimal": "pass str(value) to keep every digit",
    "set": "pass sorted(value) as a list",
    "frozenset": "pass sorted(value) as a list",
    "bytes": "pass base64 text or a reference to where the data is stored",
    "UUID": "pass str(value)",
}
