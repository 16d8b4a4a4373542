"""What a queue's settings may be, and the values QUEUE_ENGINE gives each queue.

A field's value from settings is, first found: `QUEUE_ENGINE["QUEUES"][name][field]`,
`QUEUE_ENGINE["QUEUE_DEFAULTS"][field]`, `LOCK_DURATION` for lock_duration when
it is set; settings "declare" those fields. A queue's row starts from them, and
from the model's defaults for the rest. Nothing here touches the database;
`queue_engine.ops.queues` writes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import NOT_PROVIDED

from queue_engine.conf import is_set, option

# field: (smallest value, whether None is allowed, what None means)
LIMITS: dict[str, tuple[int, bool, str]] = {
    "max_concurrency": (1, True, "no limit"),
    "rate_limit": (1, True, "no limit"),
    "rate_window": (1, False, ""),
    "lock_duration": (1, False, ""),
    "group_concurrency": (1, True, "no limit"),
    "retain_succeeded": (0, False, ""),
    "retain_failed": (0, False, ""),
    "retain_cancelled": (0, False, ""),
}
# Fields that are True or False, besides `paused`: the rate limit applies to each group
# key on its own; claims take turns between the group keys.
SWITCHES = ("rate_limit_per_key", "fair_share")
EDITABLE = ("paused", *LIMITS, *SWITCHES)
# What handing a queue back to settings resets unless told otherwise: all but `paused`.
HANDED_BACK = (*LIMITS, *SWITCHES)
MAX_SECONDS = 10 * 366 * 86400


def name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not 0 < len(name) <= 128:
        return f"A queue name has 1 to 128 characters, not {name!r}."
    return None


def unknown_fields(fields: Mapping[str, Any]) -> list[str]:
    return sorted(set(fields) - set(EDITABLE))


def value_problem(field: str, value: object) -> str | None:
    """What is wrong with one field's value ("must be True or False"), or None."""
    if field == "paused" or field in SWITCHES:
        return None if isinstance(value, bool) else "must be True or False"
    minimum, nullable, none_means = LIMITS[field]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_SECONDS:
        also = f", or None for {none_means}" if nullable else ""
        return f"must be a whole number from {minimum} to {MAX_SECONDS}{also}, not {value!r}"
    return None


def settings_problems() -> list[str]:
    """Everything wrong with QUEUES and QUEUE_DEFAULTS, each naming the queue and the field."""
    problems = []
    queues = option("QUEUES")
    if not isinstance(queues, Mapping):
        problems.append(
            "QUEUE_ENGINE['QUEUES'] must map queue names to dicts of queue settings, "
            'for example {"emails": {"max_concurrency": 5}}.'
        )
        queues = {}
    for where, fields in [
        ("QUEUE_ENGINE['QUEUE_DEFAULTS']", option("QUEUE_DEFAULTS")),
        *((f"QUEUE_ENGINE['QUEUES'][{name!r}]", fields) for name, fields in queues.items()),
    ]:
        if not isinstance(fields, Mapping):
            problems.append(f"{where} must be a dict of queue settings, not {fields!r}.")
            continue
        unknown = unknown_fields(fields)
        if unknown:
            problems.append(
                f"{where} has unknown setting(s) {', '.join(map(str, unknown))}; "
                f"the settings are {', '.join(EDITABLE)}."
            )
        problems.extend(
            f"{where}[{field!r}] {problem}."
            for field, value in fields.items()
            if field in EDITABLE and (problem := value_problem(field, value))
        )
    problems.extend(
        f"QUEUE_ENGINE['QUEUES'] names a bad queue: {problem}"
        for name in queues
        if (problem := name_problem(name))
    )
    if is_set("LOCK_DURATION"):
        seconds = option("LOCK_DURATION")
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
        ):
            lock_problem: str | None = f"must be a number of seconds, not {seconds!r}"
        else:
            lock_problem = value_problem("lock_duration", math.ceil(seconds))
        if lock_problem:
            problems.append(f"QUEUE_ENGINE['LOCK_DURATION'] {lock_problem}.")
    return problems


def check() -> None:
    """Refuse bad QUEUES or QUEUE_DEFAULTS before anything is written from them."""
    problems = settings_problems()
    if problems:
        raise ImproperlyConfigured(" ".join(problems))


def named_queues() -> list[str]:
    return sorted(option("QUEUES"))


def declared(name: str | None) -> dict[str, Any]:
    """The fields settings set for queue `name` (None: a queue QUEUES does not name)."""
    fields: dict[str, Any] = {}
    if is_set("LOCK_DURATION"):
        fields["lock_duration"] = math.ceil(option("LOCK_DURATION"))
    fields.update(option("QUEUE_DEFAULTS"))
    if name is not None:
        fields.update(option("QUEUES").get(name, {}))
    return fields


def starting_values(name: str | None) -> dict[str, Any]:
    """Every field of a new queue's row: what settings declare, else the model's default."""
    return {**model_defaults(), **declared(name)}


def model_defaults() -> dict[str, Any]:
    """QueueConfig's database defaults (None where a field has none: no limit)."""
    from queue_engine.models import QueueConfig

    defaults = {}
    for name in EDITABLE:
        default = getattr(QueueConfig._meta.get_field(name), "db_default", NOT_PROVIDED)
        defaults[name] = None if default is NOT_PROVIDED else getattr(default, "value", default)
    return defaults
