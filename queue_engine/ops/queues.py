"""Operator actions on queues: edit a queue's configuration, pause, resume, reset it.

Like `queue_engine.ops`, each action runs in one transaction with the
AuditEvent that records it, checks everything before writing, and refuses what
it cannot do with a message that says why. Workers stop claiming from a paused
queue at their next claim (the claim skips paused queues); resuming also wakes
them through NOTIFY so that they do not wait for their next poll.

A queue's row starts from QUEUE_ENGINE's settings (`queue_engine.queue_defaults`);
`declare_configured` applies them again at every worker start and after migrate,
except to the fields an operator changed (the row's `edited_fields`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.apps import apps as global_apps
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.models.functions import Now

from queue_engine import queue_defaults, sql
from queue_engine.audit import audit
from queue_engine.exceptions import OpsError
from queue_engine.models import GroupLimit, GroupWeight, QueueConfig
from queue_engine.queue_defaults import EDITABLE, HANDED_BACK, LIMITS, MAX_SECONDS

__all__ = [
    "EDITABLE",
    "HANDED_BACK",
    "LIMITS",
    "MAX_SECONDS",
    "check_settings",
    "declare_configured",
    "group_limit_problem",
    "pause_queue",
    "reset_queue_config",
    "resume_queue",
    "set_group_limit",
    "set_group_weight",
    "update_queue_config",
]
SETTINGS_ACTOR = "settings"
log = logging.getLogger(__name__)


def update_queue_config(name: str, *, actor: Any = None, **fields: Any) -> QueueConfig:
    """Change a queue's settings, creating its row if no job used the queue yet.

    Fields: paused, max_concurrency, rate_limit, rate_window, lock_duration,
    group_concurrency (None: no limit), rate_limit_per_key (True: rate_limit is each
    group key's own budget), fair_share (claims take turns between the group keys,
    weighted by set_group_weight) and retain_succeeded, retain_failed, retain_cancelled
    (seconds). Unchanged values are not audited.
    """
    check_settings(name, fields)
    return _update(name, fields, actor, action="queue_config")


def pause_queue(name: str, *, actor: Any = None) -> QueueConfig:
    """Stop workers from starting this queue's jobs; running ones finish, enqueues still land."""
    check_settings(name, {})
    return _update(name, {"paused": True}, actor, action="pause")


def resume_queue(name: str, *, actor: Any = None) -> QueueConfig:
    check_settings(name, {})
    return _update(name, {"paused": False}, actor, action="resume")


def reset_queue_config(name: str, *fields: str, actor: Any = None) -> QueueConfig:
    """Hand fields back to settings: their values become the settings' ones.

    The default is every limit, switch (rate_limit_per_key, fair_share) and retention
    field but not `paused`: handing settings back never pauses or resumes a queue unless
    the caller names "paused". The fields leave `edited_fields`, so the next worker start
    sets them again.
    """
    check_settings(name, dict.fromkeys(fields, None), values=False)
    return _update(name, {}, actor, action="queue_config_reset", reset=fields or HANDED_BACK)


def set_group_limit(
    queue: str,
    group_key: str,
    max_concurrency: int | None,
    *,
    rate_limit: int | None = None,
    actor: Any = None,
) -> GroupLimit | None:
    """Give one group key its own limits: `max_concurrency` caps how many of its jobs run
    at once, over the queue's group_concurrency; `rate_limit` is its own budget of starts
    per rate window, over the queue's rate_limit, where the queue's rate limit applies
    per key (rate_limit_per_key).

    A max_concurrency of 0 holds the key: none of its jobs start until the override
    changes. None keeps the queue's value; with both None the key's row goes.
    The claim reads the row by exact (queue, group_key), as written here.
    """
    problem = queue_defaults.name_problem(queue) or group_limit_problem(
        queue, group_key, max_concurrency, rate_limit
    )
    if problem:
        raise OpsError(problem)
    return _set_key_row(
        GroupLimit,
        queue,
        group_key,
        {"max_concurrency": max_concurrency, "rate_limit": rate_limit},
        actor,
        "group_limit",
    )


def set_group_weight(
    queue: str, group_key: str, weight: int | None, *, actor: Any = None
) -> GroupWeight | None:
    """Give one group key of a fair queue (fair_share) `weight` turns for every other
    key's one. None (or 1) removes the row: the key weighs 1."""
    problem = queue_defaults.name_problem(queue) or group_weight_problem(queue, group_key, weight)
    if problem:
        raise OpsError(problem)
    new = {"weight": None if weight == 1 else weight}
    return _set_key_row(GroupWeight, queue, group_key, new, actor, "group_weight")


def _set_key_row[Row: (GroupLimit, GroupWeight)](
    model: type[Row],
    queue: str,
    group_key: str,
    new: dict[str, int | None],
    actor: Any,
    action: str,
) -> Row | None:
    """Write one key's row of `model` with `new` (or delete it when every value is None),
    wake the queue's workers and audit the change as `action`."""
    rows = model.objects.filter(queue=queue, group_key=group_key)
    with transaction.atomic():
        current = rows.select_for_update().first()
        old = {f: getattr(current, f) if current else None for f in new}
        if old == new:
            return current
        if all(value is None for value in new.values()):
            rows.delete()
            current = None
        else:
            current, _ = model.objects.update_or_create(
                queue=queue, group_key=group_key, defaults=new
            )
        with connection.cursor() as cursor:
            cursor.execute(sql.NOTIFY_QUEUES, [[queue]])  # a looser limit may free waiting jobs
            cursor.execute(sql.NOTIFY_EVENT, [json.dumps({"type": "queue", "queues": [queue]})])
        audit(
            actor,
            action,
            "queue",
            queue,
            1,
            group_key=group_key,
            changes={f: [old[f], new[f]] for f in new if old[f] != new[f]},
        )
    return current


def group_weight_problem(queue: str, key: object, weight: object) -> str | None:
    if not isinstance(key, str) or not 0 < len(key) <= 255:
        return f"Cannot set a group weight on queue {queue!r}: a group key has 1 to 255 characters."
    if weight is not None and (
        isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000
    ):
        return (
            f"Cannot set the weight of group {key!r} on queue {queue!r}: it must be a whole "
            f"number from 1 to 1000, or None for the default of 1, not {weight!r}."
        )
    return None


def group_limit_problem(
    queue: str, key: object, limit: object, rate_limit: object = None
) -> str | None:
    if not isinstance(key, str) or not 0 < len(key) <= 255:
        return f"Cannot set a group limit on queue {queue!r}: a group key has 1 to 255 characters."
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_SECONDS
    ):
        return (
            f"Cannot set the limit of group {key!r} on queue {queue!r}: it must be a whole number "
            f"from 0 (hold the group) to {MAX_SECONDS}, or None to remove it, not {limit!r}."
        )
    if rate_limit is not None and (
        isinstance(rate_limit, bool)
        or not isinstance(rate_limit, int)
        or not 1 <= rate_limit <= MAX_SECONDS
    ):
        return (
            f"Cannot set the rate limit of group {key!r} on queue {queue!r}: it must be a whole "
            f"number from 1 to {MAX_SECONDS} (starts per rate window), or None for the "
            f"queue's, not {rate_limit!r}."
        )
    return None


def declare_configured() -> dict[str, list[str]]:
    """Apply QUEUE_ENGINE["QUEUES"] and ["QUEUE_DEFAULTS"]; at worker start and after migrate.

    Writes the values new queues start with (QueueDefaults, read by the enqueue
    trigger), creates the rows of the queues QUEUES names, and sets the fields
    settings name on every row, except those an operator changed. Everything is
    checked before anything is written. Returns each changed queue's changed fields.
    """
    queue_defaults.check()
    changed: dict[str, list[str]] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.SAVE_QUEUE_DEFAULTS, queue_defaults.starting_values(None))
        names = set(queue_defaults.named_queues())
        if queue_defaults.declared(None):
            names.update(QueueConfig.objects.values_list("name", flat=True))
        for name in sorted(names):  # rows locked in name order: no deadlock between workers
            _, changes = _apply(
                name, queue_defaults.declared(name), SETTINGS_ACTOR, "queue_config", edit=False
            )
            if changes:
                changed[name] = sorted(changes)
    return changed


def declare_after_migrate(using: str = DEFAULT_DB_ALIAS, apps: Any = None, **kwargs: Any) -> None:
    """post_migrate (sent by migrate and flush): declare the settings if our tables exist."""
    try:
        model = (apps or global_apps).get_model("queue_engine", "QueueDefaults")
    except LookupError:  # migrated back to zero
        return
    if not set(EDITABLE) <= {f.name for f in model._meta.get_fields()}:
        return  # migrated back before a setting's column: the next migrate declares them
    if using == DEFAULT_DB_ALIAS:
        changed = declare_configured()
        if changed:
            log.info("queue settings applied: %s", changed)


def check_settings(name: object, fields: dict[str, Any], *, values: bool = True) -> None:
    """Refuse unknown settings and out-of-range values before anything is written."""
    problem = queue_defaults.name_problem(name)
    if problem:
        raise OpsError(problem)
    unknown = queue_defaults.unknown_fields(fields)
    if unknown:
        raise OpsError(
            f"Cannot update queue {name!r}: unknown setting(s) {', '.join(unknown)}; "
            f"the settings are {', '.join(EDITABLE)}."
        )
    for field, value in fields.items() if values else ():
        problem = queue_defaults.value_problem(field, value)
        if problem:
            raise OpsError(f"Cannot update queue {name!r}: {field} {problem}.")


def _update(
    name: str,
    fields: dict[str, Any],
    actor: Any,
    *,
    action: str,
    reset: tuple[str, ...] = (),
) -> QueueConfig:
    with transaction.atomic():
        config, _ = _apply(name, fields, actor, action, edit=True, reset=reset)
    return config


def _apply(
    name: str,
    fields: dict[str, Any],
    actor: Any,
    action: str,
    *,
    edit: bool,
    reset: tuple[str, ...] = (),
) -> tuple[QueueConfig, dict[str, list[Any]]]:
    """Change a queue's row (created from the settings if missing) and audit what changed.

    `edit`: an operator's change, recorded in edited_fields; otherwise settings, which
    skip the fields an operator changed. `reset` fields take the settings' values
    and leave edited_fields.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql.ENSURE_QUEUE_CONFIG, {"name": name, **queue_defaults.starting_values(name)}
        )
        config = QueueConfig.objects.select_for_update().get(name=name)
        edited = set(config.edited_fields)
        if reset:
            starting = queue_defaults.starting_values(name)
            fields = {f: starting[f] for f in reset}
            edited -= set(reset)
        elif not edit:
            fields = {f: v for f, v in fields.items() if f not in edited}
        changes = {f: [getattr(config, f), v] for f, v in fields.items() if getattr(config, f) != v}
        if edit and not reset:
            edited |= set(changes)
        handed_back = sorted(set(config.edited_fields) - edited)
        if not changes and edited == set(config.edited_fields):
            return config, {}
        for field, (_, new) in changes.items():
            setattr(config, field, new)
        config.edited_fields = sorted(edited)
        config.updated_at = Now()
        config.save(update_fields=[*changes, "edited_fields", "updated_at"])
        config.refresh_from_db(fields=["updated_at"])
        if changes.get("paused", [None, None])[1] is False:
            cursor.execute(sql.NOTIFY_CONTROL, [json.dumps({"action": "resume", "queue": name})])
            cursor.execute(sql.NOTIFY_QUEUES, [[name]])
        elif "paused" in changes:
            cursor.execute(sql.NOTIFY_CONTROL, [json.dumps({"action": "pause", "queue": name})])
        cursor.execute(sql.NOTIFY_EVENT, [json.dumps({"type": "queue", "queues": [name]})])
        details: dict[str, Any] = {"changes": changes}
        if handed_back:
            details["handed_back"] = handed_back
        audit(actor, action, "queue", name, 1, **details)
    return config, changes
