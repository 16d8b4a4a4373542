"""Realistic console data written straight to the tables: every state, errors, logs, workers."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from queue_engine.models import AuditEvent, Job, JobLog, JobRecord, QueueConfig, WorkerProcess

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def next_ids(n: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence('queue_engine_job', 'id')) "
            "FROM generate_series(1, %s)",
            [n],
        )
        return [row[0] for row in cursor.fetchall()]


def error(attempt: int, cls: str, message: str, worker: str = "web-1:4242") -> dict[str, Any]:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        tb = "".join(traceback.format_exception(exc))
    return {
        "attempt": attempt,
        "class": cls,
        "message": message,
        "traceback": tb,
        "worker": worker,
        "at": (timezone.now() - timedelta(minutes=10 - attempt)).isoformat(),
    }


def record(
    state: str,
    *,
    queue: str = "emails",
    kind: str = "demo.send_email",
    name: str = "",
    payload: dict[str, Any] | None = None,
    result: Any = None,
    errors: list[dict[str, Any]] | None = None,
    attempt: int = 1,
    ago: timedelta = timedelta(minutes=5),
    ran: timedelta = timedelta(seconds=2),
    **extra: Any,
) -> JobRecord:
    finished = timezone.now() - ago
    started = finished - ran
    return JobRecord.objects.create(
        id=next_ids(1)[0],
        state=state,
        queue=queue,
        kind=kind,
        name=name,
        payload=payload or {},
        result=result,
        errors=errors or [],
        attempt=attempt,
        max_attempts=extra.pop("max_attempts", 5),
        created_at=started - timedelta(seconds=3),
        run_at=started - timedelta(seconds=1),
        started_at=started,
        finished_at=finished,
        worker=extra.pop("worker", "web-1:4242"),
        **extra,
    )


@dataclass
class ConsoleData:
    running: Job
    available: list[Job] = field(default_factory=list)
    scheduled: Job | None = None
    blocked: Job | None = None
    succeeded: list[JobRecord] = field(default_factory=list)
    dead: list[JobRecord] = field(default_factory=list)
    cancelled: JobRecord | None = None


def seed(xss: bool = False) -> ConsoleData:
    """A few queues with jobs in every state, dead jobs with tracebacks, logs and two workers.

    With `xss`, attacker-looking strings go into payloads, errors, logs and a queue name.
    """
    now = timezone.now()
    evil = XSS if xss else ""
    for name in ("billing", "emails", "media", "reports"):
        QueueConfig.objects.get_or_create(name=name)
    available = [
        Job.objects.create(
            kind="demo.send_email",
            queue="emails",
            name=f"Email to user{i}@example.com",
            payload={
                "to": f"user{i}@example.com",
                "subject": "Welcome",
                "api_token": "tok_live_SECRET1234",
            },
            run_at=now - timedelta(seconds=40 - i),
        )
        for i in range(6)
    ]
    available.append(
        Job.objects.create(
            kind="demo.resize_image", queue="media", payload={"image_id": 7, "account": "acme"}
        )
    )
    scheduled = Job.objects.create(
        kind="demo.send_email",
        queue="emails",
        state="scheduled",
        name="Reminder to later@example.com",
        payload={"to": "later@example.com", "subject": "Reminder"},
        run_at=now + timedelta(minutes=10),
        priority=5,
    )
    blocked = Job.objects.create(
        kind="demo.slow_report",
        queue="reports",
        state="blocked",
        payload={"rows": 5},
        pending_deps=2,
    )
    running = Job.objects.create(
        kind="demo.slow_report",
        queue="reports",
        state="running",
        name="Monthly report",
        payload={
            "rows": 20,
            "db_password": "hunter2",
            "nested": {"Authorization": "Bearer abc", "region": "eu"},
            "note": evil or "quarterly numbers",
        },
        attempt=2,
        errors=[error(1, "builtins.ConnectionError", "database went away")],
        created_at=now - timedelta(minutes=3),
        run_at=now - timedelta(seconds=14),
        started_at=now - timedelta(seconds=12),
        heartbeat_at=now,
        lease_owner="web-1:4242",
        claim_token=1,
        lease_expires_at=now + timedelta(seconds=60),
        progress=0.45,
        progress_message="batch 9 of 20",
    )
    lines = [
        ("stdout", "", "processed batch 1 of 20"),
        ("stdout", "", "processed batch 2 of 20"),
        ("log", "warning", "reports.jobs: slow query on accounts (1.8 s)"),
        ("stderr", "", "DeprecationWarning: use fetch_many()"),
        ("stdout", "", evil or "processed batch 3 of 20"),
    ]
    JobLog.objects.bulk_create(
        [
            JobLog(
                job_id=running.id,
                attempt=2,
                seq=i + 1,
                stream=stream,
                level=level,
                at=now - timedelta(seconds=10 - i),
                text=text,
            )
            for i, (stream, level, text) in enumerate(lines)
        ]
    )
    succeeded = [
        record(
            "succeeded",
            name=f"Email to done{i}@example.com",
            payload={"to": f"done{i}@example.com"},
            result={"delivered_to": f"done{i}@example.com", "session_secret": "s3cr3t"},
            ago=timedelta(minutes=2 + i),
        )
        for i in range(4)
    ]
    dead = [
        record(
            "failed",
            queue="billing",
            kind="demo.charge_card",
            payload={"order_id": 3 * i, "amount_cents": 1999},
            errors=[error(1, "demo.CardDeclined", f"card for order {3 * i} was declined")],
            ago=timedelta(minutes=i + 1),
            max_attempts=3,
        )
        for i in range(1, 4)
    ]
    dead.append(
        record(
            "failed",
            queue="billing",
            kind="demo.charge_card",
            payload={"order_id": 7},
            attempt=3,
            max_attempts=3,
            errors=[
                error(a, "builtins.ConnectionError", evil or "payment gateway timed out")
                for a in (1, 2, 3)
            ],
            ago=timedelta(minutes=8),
        )
    )
    cancelled = record(
        "cancelled",
        queue="media",
        kind="demo.resize_image",
        payload={"image_id": 3},
        errors=[error(1, "queue_engine.Cancelled", "cancelled by admin")],
    )
    if xss:
        Job.objects.create(kind="demo.send_email", queue=evil, name=evil, payload={"x": evil})
    now = timezone.now()
    WorkerProcess.objects.create(
        id="web-1:4242",
        host="web-1",
        pid=4242,
        queues=[],
        labels=["gpu"],
        concurrency=8,
        in_flight=1,
        is_leader=True,
        heartbeat_at=now,
    )
    WorkerProcess.objects.create(
        id="web-2:5151",
        host="web-2",
        pid=5151,
        queues=["emails", "media"],
        labels=[],
        concurrency=4,
        in_flight=0,
        heartbeat_at=now - timedelta(seconds=40),
    )
    from queue_engine import schedules

    schedules.upsert_cron(
        "nightly-report",
        "demo.slow_report",
        cron="0 3 * * *",
        timezone="Europe/Paris",
        payload={"rows": 50},
    )
    schedules.upsert_interval(
        "digest", "demo.send_email", every=900, payload={"to": "team@example.com"}
    )
    AuditEvent.objects.create(
        actor="admin", action="redrive", target_type="job", target=str(dead[0].id), count=1
    )
    return ConsoleData(
        running=running,
        available=available,
        scheduled=scheduled,
        blocked=blocked,
        succeeded=succeeded,
        dead=dead,
        cancelled=cancelled,
    )


def history(n: int = 600, span: timedelta = timedelta(hours=2)) -> None:
    """`n` ended jobs spread over the last `span`, for charts: mostly successes, some dead."""
    import random

    rng = random.Random(6)
    now = timezone.now()
    rows = []
    for i, job_id in enumerate(next_ids(n)):
        finished = now - span * ((n - i) / n) + timedelta(seconds=rng.uniform(0, 5))
        ran = timedelta(seconds=rng.lognormvariate(-1.0, 0.8))
        waited = timedelta(seconds=rng.lognormvariate(-2.5, 1.0))
        queue = rng.choice(["emails", "emails", "emails", "media", "reports"])
        state = "failed" if rng.random() < 0.04 else "succeeded"
        started = finished - ran
        rows.append(
            JobRecord(
                id=job_id,
                state=state,
                queue=queue,
                kind=f"demo.{queue}_job",
                payload={"n": i},
                attempt=1,
                max_attempts=5,
                created_at=started - waited,
                run_at=started - waited,
                started_at=started,
                finished_at=finished,
                worker="web-1:4242",
                errors=[error(1, "builtins.TimeoutError", "upstream timed out")]
                if state == "failed"
                else [],
            )
        )
    JobRecord.objects.bulk_create(rows)
