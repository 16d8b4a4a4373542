"""The metrics count what ran: the nodes a rerun from a node reuses are not successes."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from queue_engine import ops, reads
from queue_engine.models import JobRecord, MetricBucket, RollupState
from queue_engine.worker.services import roll_up, rollup, rollup_slices
from tests.support.flow_helpers import diamond, flow_settled, flow_state
from tests.support.services import run_service
from tests.support.workers import Workers

pytestmark = pytest.mark.slow

TOKEN = "scrape-the-rerun"


def outcomes(points: list[reads.SeriesPoint]) -> dict[str, int]:
    return {
        "succeeded": sum(p.succeeded for p in points),
        "failed": sum(p.failed for p in points),
        "cancelled": sum(p.cancelled for p in points),
    }


def scraped_successes() -> float:
    text = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).content
    return sum(
        s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
        if s.name == "queue_engine_finished_jobs_5m" and s.labels["outcome"] == "succeeded"
    )


def as_if_two_minutes_ago() -> None:
    """Move the history two minutes back, waits and runs unchanged, and forget every
    rollup: the rows' minutes have closed, so a rollup counts them now rather than after
    a minute's wait."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE queue_engine_jobrecord SET run_at = run_at - interval '2 minutes', "
            "created_at = created_at - interval '2 minutes', "
            "started_at = started_at - interval '2 minutes', "
            "finished_at = finished_at - interval '2 minutes'"
        )
    MetricBucket.objects.all().delete()
    RollupState.objects.all().delete()


@pytest.mark.parametrize("pace", [False, True], ids=["one statement", "paced slices"])
def test_nodes_a_rerun_reuses_are_not_counted_as_succeeded_jobs(
    executions: None,
    workers: Workers,
    conninfo: str,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    pace: bool,
) -> None:
    settings.QUEUE_ENGINE = {**getattr(settings, "QUEUE_ENGINE", {}), "METRICS_TOKEN": TOKEN}
    old_id = diamond()
    workers.start("--queues", "flows")
    flow_settled(old_id, "failed")
    new_id = ops.rerun_flow_from(old_id, "right", {"label": "right, fixed", "fail": False})
    flow_state(new_id, "succeeded")
    live = outcomes(reads.metric_series(timedelta(minutes=15)).points)
    workers.stop_all()
    as_if_two_minutes_ago()
    if pace:  # caught up to the rows' first minute: the next pass reads it in slices
        first = JobRecord.objects.order_by("finished_at").first()
        assert first is not None
        minute = first.finished_at.astimezone(UTC).replace(second=0, microsecond=0)
        RollupState.objects.create(name="metrics", rolled_up_to=minute)
        monkeypatch.setattr(rollup, "PACED_SPAN", timedelta(minutes=10))
        monkeypatch.setattr(rollup_slices, "PAUSE", 0.0)

    run_service(conninfo, roll_up, pace=pace)

    ended = JobRecord.objects.values_list("state", flat=True)
    reused = JobRecord.objects.filter(meta__has_key="reused_from").count()
    ran = {state: sum(1 for s in ended if s == state) for state in ("failed", "cancelled")}
    # root and left ran in the first flow; right and join in the rerun, which reused
    # root and left: six succeeded rows, four runs.
    assert list(ended).count("succeeded") == 6 and reused == 2
    expected = {"succeeded": 4, **ran}
    minutes, hours = (MetricBucket.objects.filter(size=size) for size in (60, 3600))
    seen = {
        "the charts' live tail": live,
        "minute buckets": {k: sum(getattr(b, k) for b in minutes) for k in expected},
        "hour buckets": {k: sum(getattr(b, k) for b in hours) for k in expected},
        "the charts, rolled up": outcomes(reads.metric_series(timedelta(minutes=15)).points),
        "/metrics": {"succeeded": scraped_successes()},
    }
    assert seen == {
        **{where: expected for where in list(seen)[:4]},
        "/metrics": {"succeeded": 4},
    }
