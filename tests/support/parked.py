"""Parked jobs made by hand, as a worker parks them, for console tests."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from queue_engine.models import Job


def parked_job(signal: str | None, until: timedelta | None) -> Job:
    now = timezone.now()
    deadline = now + until if until is not None else None
    return Job.objects.create(
        kind="tests.wait_signal",
        queue="waits",
        name="publish article",
        state="parked",
        run_at=deadline or now.replace(year=9999, month=12, day=31),
        meta={
            "parked": {
                "step": f"signal:{signal}#1" if signal else "sleep#1",
                "signal": signal,
                "since": (now - timedelta(minutes=5)).isoformat(),
                "until": deadline.isoformat() if deadline else None,
            }
        },
    )
