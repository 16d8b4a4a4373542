"""Retention (worker/services/retention.py): ended jobs past their queue's window are
deleted in short batches, never before the metrics rollup has counted them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queue_engine.models import FlowRun, JobLog, JobRecord, MetricBucket, QueueConfig
from queue_engine.worker.services import delete_expired, roll_up
from queue_engine.worker.services.retention import Swept
from tests.support.history import database_now, history_row, rolled_up_to, with_logs
from tests.support.services import run_service
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_gc_removes_only_what_is_past_its_queue_window_with_its_logs(conninfo: str) -> None:
    QueueConfig.objects.create(
        name="gc", retain_succeeded=3600, retain_failed=7200, retain_cancelled=60
    )
    QueueConfig.objects.create(name="other")  # the defaults: a day, a week, a day
    now = database_now()
    rolled_up_to(now)
    h = timedelta(hours=1)
    expired = with_logs(
        [
            history_row(now - 2 * h),
            history_row(now - 3 * h, state="failed"),
            history_row(now - timedelta(minutes=2), state="cancelled"),
        ]
    )
    kept = with_logs(
        [
            history_row(now - h / 2),
            history_row(now - h, state="failed"),
            history_row(now - timedelta(seconds=10), state="cancelled"),
            history_row(now - 2 * h, queue="other"),
            history_row(now - 3 * h, queue="other", state="failed"),
        ]
    )

    collected = run_service(conninfo, delete_expired)

    remaining = set(JobRecord.objects.values_list("id", flat=True))
    assert remaining == {r.id for r in kept}
    assert set(JobLog.objects.values_list("job_id", flat=True)) == remaining
    assert (collected.deleted, collected.more) == (len(expired), False)


def test_gc_keeps_the_ended_nodes_of_a_flow_still_running(conninfo: str) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    now = database_now()
    rolled_up_to(now)
    running, ended = (FlowRun.objects.create(name="slow", state=s) for s in ("running", "failed"))
    old = now - timedelta(hours=1)
    nodes = [history_row(old), history_row(old), history_row(old)]
    for node, flow in zip(nodes, [running, ended, None], strict=True):
        node.flow_id = flow.pk if flow else None
    JobRecord.objects.bulk_create(nodes)

    run_service(conninfo, delete_expired)

    # The running flow's children still to run need the parent's output; the ended
    # flow goes with its last node.
    assert list(JobRecord.objects.values_list("id", flat=True)) == [nodes[0].id]
    assert list(FlowRun.objects.values_list("id", flat=True)) == [running.pk]


def test_gc_deletes_in_bounded_batches(conninfo: str) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    now = database_now()
    rolled_up_to(now)
    JobRecord.objects.bulk_create(history_row(now - timedelta(hours=1)) for _ in range(1050))

    collected = run_service(conninfo, delete_expired, batch_size=100)

    assert (collected.deleted, collected.batches) == (1050, 11)
    assert not JobRecord.objects.exists()


def test_the_leaders_collector_rereads_only_from_where_it_swept(conninfo: str) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=3600)
    now = database_now()
    rolled_up_to(now)
    JobRecord.objects.bulk_create([history_row(now - timedelta(days=2))])
    swept = Swept()

    first = run_service(conninfo, delete_expired, swept=swept)
    JobRecord.objects.bulk_create([history_row(now - timedelta(hours=1, minutes=5))])
    second = run_service(conninfo, delete_expired, swept=swept)

    assert (first.deleted, second.deleted) == (1, 1)
    assert swept.until[("gc", "succeeded")] >= now - timedelta(hours=1)


def test_gc_keeps_rows_the_rollup_has_not_counted_yet(conninfo: str) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    now = database_now()
    rolled_up_to(now - timedelta(hours=2))
    _, recent = with_logs(
        [history_row(now - timedelta(hours=3)), history_row(now - timedelta(hours=2, seconds=30))]
    )

    run_service(conninfo, delete_expired)

    assert list(JobRecord.objects.values_list("id", flat=True)) == [recent.id]


@pytest.mark.parametrize("state_row", [True, False], ids=["watermark NULL", "no state row"])
def test_gc_deletes_nothing_before_the_rollups_first_watermark(
    conninfo: str, state_row: bool
) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    if state_row:
        rolled_up_to(None)  # type: ignore[arg-type]  # the first rollup has not finished
    now = database_now()
    old = with_logs([history_row(now - timedelta(days=2)), history_row(now - timedelta(hours=1))])
    swept = Swept()

    collected = run_service(conninfo, delete_expired, swept=swept)
    swept_before = dict(swept.until)
    run_service(conninfo, roll_up)
    after_rollup = run_service(conninfo, delete_expired, swept=swept)

    assert collected.deleted == 0 and swept_before == {}  # the next sweep reads everything
    assert after_rollup.deleted == len(old) and not JobLog.objects.exists()
    counted = MetricBucket.objects.filter(size=60, queue="gc")
    assert sum(counted.values_list("succeeded", flat=True)) == len(old)


def test_the_rollup_outlives_retention(conninfo: str) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    now = database_now()
    JobRecord.objects.bulk_create([history_row(now - timedelta(hours=2)) for _ in range(5)])

    run_service(conninfo, roll_up)
    run_service(conninfo, delete_expired)

    assert not JobRecord.objects.exists()
    assert sum(MetricBucket.objects.filter(size=60).values_list("succeeded", flat=True)) == 5


@pytest.mark.slow
def test_the_leader_rolls_up_then_collects(workers: Workers) -> None:
    QueueConfig.objects.create(name="gc", retain_succeeded=60)
    now = database_now()
    JobRecord.objects.bulk_create([history_row(now - timedelta(minutes=10)) for _ in range(20)])

    workers.start("--queues", "gc")

    wait_for(lambda: not JobRecord.objects.exists(), timeout=45, message="the collector")
    assert sum(MetricBucket.objects.filter(size=60).values_list("succeeded", flat=True)) == 20
