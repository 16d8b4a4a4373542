"""The audit log's rows: who did what. Below every layer that acts for someone (operator
actions, schedule declarations), so that none of them imports another to record it."""

from __future__ import annotations

from typing import Any

from queue_engine.models import AuditEvent


def actor_name(actor: Any) -> str:
    if actor is None:
        return "system"
    if isinstance(actor, str):
        return actor
    return str(getattr(actor, "get_username", lambda: actor)())


def audit(
    actor: Any, action: str, target_type: str, target: str, count: int, **details: Any
) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor_name(actor),
        action=action,
        target_type=target_type,
        target=target[:255],
        count=count,
        details=details,
    )
