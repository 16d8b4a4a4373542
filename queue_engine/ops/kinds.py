"""The kill switch per job kind: pause a kind fleet-wide, and resume it.

A paused kind's jobs stay queued (enqueues still land) and no worker claims them from
its next claim on, while the other kinds of their queues flow on; jobs of the kind that
are running finish. Each change is audited in its own transaction, like `ops`.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from queue_engine import sql
from queue_engine.audit import actor_name, audit
from queue_engine.definition.registry import is_engine_kind, registry
from queue_engine.exceptions import OpsError
from queue_engine.payloads import text_problem


def pause_kind(kind: str, *, actor: Any = None) -> bool:
    """Stop every worker from starting jobs of `kind`; False if it was paused already."""
    return _set(kind, paused=True, actor=actor)


def resume_kind(kind: str, *, actor: Any = None) -> bool:
    """Let workers start jobs of `kind` again; False if it was not paused."""
    return _set(kind, paused=False, actor=actor)


def paused_kinds() -> list[str]:
    from queue_engine.models import KindControl

    return list(
        KindControl.objects.filter(paused=True).order_by("kind").values_list("kind", flat=True)
    )


def _set(kind: str, *, paused: bool, actor: Any) -> bool:
    verb = "pause" if paused else "resume"
    _check(kind, verb)
    if paused and is_engine_kind(kind):
        raise OpsError(
            f"Cannot pause kind {kind!r}: it is the engine's own (it carries out the console's "
            "actions); pause its queue, or cancel its jobs, instead."
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            sql.SET_KIND_PAUSED, {"kind": kind, "paused": paused, "actor": actor_name(actor)}
        )
        if cursor.fetchone() is None:
            return False  # no change: nothing to audit
        if not paused:
            # Idle workers wait for a wake-up: send one to every queue, as the kind's
            # jobs may wait in any of them.
            cursor.execute(sql.ALL_QUEUES)
            cursor.execute(sql.NOTIFY_QUEUES, [cursor.fetchone()[0]])
        cursor.execute(sql.NOTIFY_EVENT, [json.dumps({"type": "kind", "kinds": [kind]})])
        audit(actor, f"{verb}_kind", "kind", kind, 1)
    return True


def _check(kind: object, verb: str) -> None:
    if not isinstance(kind, str) or not kind.strip() or len(kind) > 255:
        raise OpsError(f"Cannot {verb} kind {kind!r}: a kind is a name of 1 to 255 characters.")
    problem = text_problem(kind)
    if problem is not None:
        raise OpsError(f"Cannot {verb} kind {kind!r}: the name {problem}")
    if registry.get(kind) is not None:
        return
    with connection.cursor() as cursor:
        for seen in (sql.KIND_SEEN, sql.KIND_LIVE):
            cursor.execute(seen, {"kind": kind})
            if cursor.fetchone()[0]:
                return
    raise OpsError(
        f"Cannot {verb} kind {kind!r}: no @job of that kind is registered in this process "
        "and no job of it exists; check the spelling (kinds are dotted names such as "
        "'myapp.jobs.send_welcome')."
    )
