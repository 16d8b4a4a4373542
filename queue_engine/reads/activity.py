"""Who is at work and what operators did: the workers and the audit log."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from queue_engine.models import AuditEvent, Job, WorkerProcess
from queue_engine.reads.jobs import PAGE_SIZE

__all__ = [
    "BUSY_LIMIT",
    "WORKER_ALIVE_AFTER",
    "alive_workers",
    "audit_actions",
    "audit_page",
    "running_by_worker",
    "workers",
]

WORKER_ALIVE_AFTER = timedelta(seconds=15)  # workers heartbeat every 5 s at most


def workers() -> list[WorkerProcess]:
    return list(WorkerProcess.objects.order_by("host", "pid"))


def alive_workers() -> list[WorkerProcess]:
    since = timezone.now() - WORKER_ALIVE_AFTER
    return list(WorkerProcess.objects.filter(heartbeat_at__gte=since).order_by("host", "pid"))


BUSY_LIMIT = 1000  # running jobs shown; a fleet's concurrency is rarely larger


def running_by_worker(limit: int = BUSY_LIMIT) -> tuple[dict[str, list[Job]], bool]:
    """What each worker runs now (keyed by worker id, oldest first), and whether more
    ran than `limit`. Running rows are few, and a partial index holds them."""
    rows = list(
        Job.objects.filter(state="running")
        .only(
            "id",
            "kind",
            "name",
            "queue",
            "lease_owner",
            "started_at",
            "attempt",
            "max_attempts",
            "progress",
            "progress_message",
            "flow_id",
            "node_key",
        )
        .order_by("started_at", "id")[: limit + 1]
    )
    busy: dict[str, list[Job]] = {}
    for job in rows[:limit]:
        busy.setdefault(job.lease_owner or "", []).append(job)
    return busy, len(rows) > limit


def audit_actions() -> list[str]:
    """The actions the audit log holds, for its filter: an operator picks, not guesses."""
    return sorted(AuditEvent.objects.values_list("action", flat=True).distinct().order_by())


def audit_page(
    before: int | None, actor: str = "", action: str = "", limit: int = PAGE_SIZE
) -> tuple[list[AuditEvent], int | None]:
    qs = AuditEvent.objects.order_by("-id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    if actor:
        qs = qs.filter(actor=actor)
    if action:
        qs = qs.filter(action=action)
    events = list(qs[: limit + 1])
    older = events[limit - 1].id if len(events) > limit else None
    return events[:limit], older
