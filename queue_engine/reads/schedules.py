"""The last fires of schedules: the jobs they enqueued, for the Schedules page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from queue_engine import sql
from queue_engine.models import Schedule
from queue_engine.reads.timeout import time_limited

__all__ = ["FIRES_SHOWN", "Fire", "last_fires"]

FIRES_SHOWN = 5


@dataclass(frozen=True)
class Fire:
    job_id: int
    state: str
    fire_time: datetime | None  # None: run now, or a job from before fires wrote it
    flow_id: int | None


def last_fires(schedules: list[Schedule], per: int = FIRES_SHOWN) -> dict[str, list[Fire]]:
    """Each schedule's last `per` jobs, newest first (NarrowFilter past the timeout)."""
    if not schedules:
        return {}
    fires: dict[str, list[Fire]] = {s.name: [] for s in schedules}
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(
            sql.SCHEDULE_FIRES,
            {
                "names": [s.name for s in schedules],
                "kinds": [s.kind for s in schedules],
                "per": per,
            },
        )
        for name, job_id, state, fire_time, flow_id in cursor.fetchall():
            fires[name].append(Fire(job_id, state, _parsed(fire_time), flow_id))
    return fires


def _parsed(fire_time: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(fire_time) if fire_time else None
    except ValueError:  # a meta written by hand
        return None
