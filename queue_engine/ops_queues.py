"""Operator actions on queues: edit a queue's configuration, pause it, resume it.

Like `queue_engine.ops`, each action runs in one transaction with the
AuditEvent that records it, checks everything before writing, and refuses what
it cannot do with a message that says why. Workers stop claiming from a paused
queue at their next claim (the claim skips paused queues); resuming also wakes
them through NOTIFY so that they do not wait for their next poll.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction
from django.db.models.functions import Now

from queue_engine import sql
from queue_engine import sql_maintenance as q
from queue_engine.models import QueueConfig
from queue_engine.ops import OpsError, audit

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
EDITABLE = ("paused", *LIMITS)
MAX_SECONDS = 10 * 366 * 86400


def update_queue_config(name: str, *, actor: Any = None, **fields: Any) -> QueueConfig:
    """Change a queue's settings, creating its row if no job used the queue yet.

    Fields: paused, max_concurrency, rate_limit, rate_window, lock_duration,
    group_concurrency (None: no limit) and retain_succeeded, retain_failed,
    retain_cancelled (seconds). Unchanged values are not audited.
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


def check_settings(name: object, fields: dict[str, Any]) -> None:
    """Refuse unknown settings and out-of-range values before anything is written."""
    if not isinstance(name, str) or not 0 < len(name) <= 128:
        raise OpsError(f"A queue name has 1 to 128 characters, not {name!r}.")
    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise OpsError(
            f"Cannot update queue {name!r}: unknown setting(s) {', '.join(unknown)}; "
            f"the settings are {', '.join(EDITABLE)}."
        )
    for field, value in fields.items():
        if field == "paused":
            if not isinstance(value, bool):
                raise OpsError(f"Cannot update queue {name!r}: paused must be True or False.")
            continue
        minimum, nullable, none_means = LIMITS[field]
        if value is None and nullable:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not (minimum <= value <= MAX_SECONDS)
        ):
            also = f", or None for {none_means}" if nullable else ""
            raise OpsError(
                f"Cannot update queue {name!r}: {field} must be a whole number from "
                f"{minimum} to {MAX_SECONDS}{also}, not {value!r}."
            )


def _update(name: str, fields: dict[str, Any], actor: Any, *, action: str) -> QueueConfig:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(q.ENSURE_QUEUE_CONFIG, [name])
        config = QueueConfig.objects.select_for_update().get(name=name)
        changes = {f: [getattr(config, f), v] for f, v in fields.items() if getattr(config, f) != v}
        if not changes:
            return config
        for field, (_, new) in changes.items():
            setattr(config, field, new)
        config.updated_at = Now()
        config.save(update_fields=[*changes, "updated_at"])
        config.refresh_from_db(fields=["updated_at"])
        if changes.get("paused", [None, None])[1] is False:
            cursor.execute(sql.NOTIFY_CONTROL, [json.dumps({"action": "resume", "queue": name})])
            cursor.execute(sql.NOTIFY_QUEUES, [[name]])
        elif "paused" in changes:
            cursor.execute(sql.NOTIFY_CONTROL, [json.dumps({"action": "pause", "queue": name})])
        cursor.execute(sql.NOTIFY_EVENT, [json.dumps({"type": "queue", "queues": [name]})])
        audit(actor, action, "queue", name, 1, changes=changes)
    return config
