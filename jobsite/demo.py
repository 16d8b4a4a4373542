"""What `manage.py load_demo` writes: the demo schedules, and once per database a first batch.

The schedules keep a trickle of work coming (about one job a second); the
first batch fills every console page before the schedules have fired.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from jobsite import demo_jobs
from queue_engine import schedules
from queue_engine.models import Schedule

ACTOR = "load_demo"
SCHEDULE_NAMES = ("demo-newsletter", "demo-checkout", "demo-catalogue-import", "demo-sales-report")
# Serialises concurrent load_demo runs on one database (two `make run` at once).
LOCK_DEMO = "SELECT pg_advisory_xact_lock(hashtext('jobsite.load_demo'))"


@dataclass(frozen=True)
class Loaded:
    schedules: int
    jobs: int  # one-off jobs seeded now (0 when the database already had the demo)
    flows: int


def load(*, seconds_per_row: float = 1.0) -> Loaded:
    """Declare the demo schedules (idempotent upserts); seed the first batch if none was."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(LOCK_DEMO)
        seeded = Schedule.objects.filter(name__in=SCHEDULE_NAMES).exists()
        declare_schedules(seconds_per_row)
        if seeded:
            return Loaded(len(SCHEDULE_NAMES), 0, 0)
        jobs = seed_jobs(seconds_per_row)
        demo_jobs.catalogue_flow("spring range").submit()
        demo_jobs.invoicing_flow().submit()
    return Loaded(len(SCHEDULE_NAMES), jobs, 2)


def declare_schedules(seconds_per_row: float) -> None:
    # enabled=None: an operator's disable survives the next `make run`.
    schedules.upsert_interval(
        "demo-newsletter",
        demo_jobs.send_newsletter,
        every=15,
        payload={"size": 5, "edition": "{fire_time}"},
        actor=ACTOR,
    )
    schedules.upsert_interval(
        "demo-checkout", demo_jobs.take_payments, every=30, payload={"count": 3}, actor=ACTOR
    )
    schedules.upsert_cron(
        "demo-catalogue-import",
        demo_jobs.start_catalogue_import,
        cron="* * * * *",
        payload={"fired_at": "{fire_time}"},
        actor=ACTOR,
    )
    schedules.upsert_cron(
        "demo-sales-report",
        demo_jobs.slow_report,
        cron="*/2 * * * *",
        payload={"rows": 30, "seconds_per_row": seconds_per_row},
        actor=ACTOR,
    )


def seed_jobs(seconds_per_row: float) -> int:
    """One-off jobs; each has a dedup key, so none is doubled while it waits or runs."""
    jobs = [
        demo_jobs.send_email.using(dedup_key=f"demo:welcome:{i}").enqueue(
            to=f"user{i}@example.com", subject="Welcome"
        )
        for i in range(12)
    ]
    jobs.append(
        demo_jobs.send_email.using(dedup_key="demo:reminder", delay=600, priority=5).enqueue(
            to="later@example.com", subject="Reminder"
        )
    )
    # Order numbers pick the ending (demo_jobs.charge_outcome): paid after one retry,
    # declined (dead at once), gateway down on every attempt (dead after three).
    for order_id, cents in ((1005, 2500), (1003, 1999), (1007, 4999)):
        jobs.append(
            demo_jobs.charge_card.using(dedup_key=f"demo:charge:{order_id}").enqueue(
                order_id=order_id, amount_cents=cents
            )
        )
    jobs.append(
        demo_jobs.slow_report.using(dedup_key="demo:report").enqueue(
            rows=30, seconds_per_row=seconds_per_row
        )
    )
    return len(jobs)
