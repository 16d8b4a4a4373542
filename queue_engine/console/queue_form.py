"""The queue configuration form: its fields, the units people write, and their parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from queue_engine import queue_defaults
from queue_engine.exceptions import OpsError
from queue_engine.ops import queues as ops_queues
from queue_engine.templatetags.queue_engine import duration

Kind = Literal["count", "duration", "switch"]

# field: (label, kind); the order of the form
FIELDS: dict[str, tuple[str, Kind]] = {
    "max_concurrency": ("Max concurrency", "count"),
    "rate_limit": ("Rate limit (jobs)", "count"),
    "rate_window": ("Rate window", "duration"),
    "rate_limit_per_key": ("Rate limit applies to", "switch"),
    "group_concurrency": ("Per-group limit", "count"),
    "fair_share": ("Fair share between keys", "switch"),
    "lock_duration": ("Lock duration", "duration"),
    "retain_succeeded": ("Keep succeeded", "duration"),
    "retain_failed": ("Keep dead", "duration"),
    "retain_cancelled": ("Keep cancelled", "duration"),
}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
UNIT_WORDS = {"sec": "s", "second": "s", "min": "m", "minute": "m", "hour": "h", "day": "d"}
DURATION = re.compile(r"(\d{1,15})\s*([a-z]*)")
COUNT = re.compile(r"\d{1,15}")
# A switch's form values, and what it says either way.
SWITCH_INPUT = {True: "yes", False: "no"}
SWITCH_SHOWN = {
    "rate_limit_per_key": {True: "each group key", False: "the whole queue"},
    "fair_share": {True: "keys take turns", False: "first come, first served"},
}


@dataclass
class Row:
    name: str
    label: str
    kind: Kind
    value: str
    edited: bool = False
    error: str = ""

    @property
    def nullable(self) -> bool:
        return self.name in queue_defaults.LIMITS and queue_defaults.LIMITS[self.name][1]

    @property
    def choices(self) -> list[tuple[str, str]]:
        """A switch's options: (form value, what it says)."""
        said = SWITCH_SHOWN.get(self.name, {})
        return [(SWITCH_INPUT[on], said[on]) for on in (False, True)] if said else []


def as_input(kind: Kind, value: int | None) -> str:
    """A value as the form shows it: "" for no limit, durations in their largest whole unit."""
    if kind == "switch":
        return SWITCH_INPUT[bool(value)]
    if value is None:
        return ""
    if kind == "count":
        return str(value)
    unit = next((u for u in "dhm" if value and value % UNITS[u] == 0), "s")
    return f"{value // UNITS[unit]}{unit}"


def shown(kind: Kind, value: int | None, field: str = "") -> str:
    if kind == "switch":
        return SWITCH_SHOWN[field][bool(value)]
    if value is None:
        return "no limit"
    return str(value) if kind == "count" else duration(value)


def parse(name: str, field: str, raw: str) -> int | None:
    """A form value as the setting's value, refused by ops' own checks when out of range."""
    _, kind = FIELDS[field]
    raw = raw.strip().lower()
    value: int | None
    if kind == "switch":
        if raw not in ("yes", "no"):
            raise OpsError("Choose one of the options.")
        value = raw == "yes"
    elif not raw and queue_defaults.LIMITS[field][1]:
        value = None
    elif kind == "count":
        if not COUNT.fullmatch(raw):
            raise OpsError("Enter a whole number, or leave it empty for no limit.")
        value = int(raw)
    else:
        match = DURATION.fullmatch(raw)
        unit = match and UNIT_WORDS.get(match[2].removesuffix("s"), match[2] or "s")
        if not match or unit not in UNITS:
            raise OpsError("Enter a duration such as 90s, 15m, 2h or 7d.")
        value = int(match[1]) * UNITS[unit]
    ops_queues.check_settings(name, {field: value})
    return value


def current_values(name: str, config: Any) -> dict[str, Any]:
    if config is None:
        return queue_defaults.starting_values(name)
    return {field: getattr(config, field) for field in queue_defaults.EDITABLE}


def config_rows(name: str, config: Any) -> list[Row]:
    values = current_values(name, config)
    edited = set(config.edited_fields) if config else set()
    return [
        Row(field, label, kind, as_input(kind, values[field]), edited=field in edited)
        for field, (label, kind) in FIELDS.items()
    ]
