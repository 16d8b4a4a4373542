"""The partitioned history: leaves made ahead of the clock, dropped whole once due."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import psycopg
import pytest
from django.db import connection

from queue_engine.models import (
    FlowEdge,
    FlowRun,
    JobLog,
    JobRecord,
    JobStep,
    QueueConfig,
    QueueDefaults,
)
from queue_engine.schema import partitions as history
from queue_engine.worker.services import keep_partitions
from queue_engine.worker.services.partitions import Kept
from tests.support.history import database_now, history_row
from tests.support.services import run_service

pytestmark = pytest.mark.django_db(transaction=True)
HOUR = timedelta(hours=1)


def windows(succeeded: int, failed: int = 7 * 86400, cancelled: int = 86400) -> None:
    """The same windows for the queue "gc" and for any queue seen later."""
    fields = {
        "retain_succeeded": succeeded,
        "retain_failed": failed,
        "retain_cancelled": cancelled,
    }
    QueueDefaults.objects.update_or_create(id=1, defaults=fields)
    QueueConfig.objects.update_or_create(name="gc", defaults=fields)


def rolled_up_to(moment: datetime) -> None:
    from queue_engine.models import RollupState

    RollupState.objects.update_or_create(name="metrics", defaults={"rolled_up_to": moment})


def leaf_of(job_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM queue_engine_jobrecord WHERE id = %s", [job_id]
        )
        return str(cursor.fetchone()[0])


def leaves() -> list[history.Leaf]:
    with connection.cursor() as cursor:
        return history.plan(cursor)[3]


@pytest.fixture(autouse=True)
def collect_added_leaves(added_leaves: list[str]) -> Iterator[None]:
    # Leaves that earlier tests' leaders made ahead of the clock outlive the flush between
    # tests (empty, as the flush left them) and cover the recent past once the suite has
    # run longer than their span: this module's tests place leaves of their own there.
    with connection.cursor() as cursor:
        for leaf in history.plan(cursor)[3]:
            cursor.execute(f"DROP TABLE IF EXISTS {leaf.name}")
    added.append(added_leaves)
    yield
    added.clear()


added: list[list[str]] = []  # the test's list, from the added_leaves fixture


def add_leaf(state: str, lo: datetime, hi: datetime) -> str:
    with connection.cursor() as cursor:
        name = history.add_leaf(cursor, state, lo, hi)
    added[0].append(name)
    return name


def test_the_leader_keeps_leaves_ahead_of_the_clock_and_settles_land_in_them(
    conninfo: str,
) -> None:
    windows(succeeded=3600)

    kept = run_service(conninfo, keep_partitions)
    again = run_service(conninfo, keep_partitions)

    now = database_now()
    succeeded = [leaf for leaf in leaves() if leaf.state == "succeeded"]
    assert max(leaf.hi for leaf in succeeded) >= now + history.AHEAD
    assert kept.waited == 0 and again == Kept(created=0, dropped=0, moved=0, waited=0)
    # A job that ends now is written to a leaf, not to the state's default leaf.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO queue_engine_jobrecord (id, queue, kind, state, attempt, max_attempts,"
            " finished_at) VALUES (%s, 'gc', 'tests.noop', 'succeeded', 1, 1,"
            " now() + interval '10 seconds')",
            [42],
        )
    assert leaf_of(42) in {leaf.name for leaf in succeeded}


def test_a_leaf_past_its_states_longest_window_goes_whole_with_its_logs(conninfo: str) -> None:
    windows(succeeded=3600)
    now = database_now()
    rolled_up_to(now)
    running = FlowRun.objects.create(name="slow", state="running")
    old = add_leaf("succeeded", now - 3 * HOUR, now - 2 * HOUR)
    recent = add_leaf("succeeded", now - HOUR / 2, now - HOUR / 4)
    gone = [history_row(now - 2.5 * HOUR) for _ in range(50)]
    flow_node = history_row(now - 2.5 * HOUR, flow=running)
    young = history_row(now - HOUR / 3)
    dead_letter = history_row(now - 2.5 * HOUR, state="failed")
    JobRecord.objects.bulk_create([*gone, flow_node, young, dead_letter])
    everyone = [*gone, flow_node, young, dead_letter]
    JobLog.objects.bulk_create(
        JobLog(job_id=r.id, attempt=1, seq=1, stream="log", text="hi") for r in everyone
    )
    JobStep.objects.bulk_create(
        JobStep(job_id=r.id, name="s", attempt=1, started_at=now) for r in everyone
    )
    assert {leaf_of(gone[0].id), leaf_of(young.id)} == {old, recent}

    kept = run_service(conninfo, keep_partitions)

    assert (kept.dropped, kept.moved, kept.waited) == (1, 1, 0)
    names = {leaf.name for leaf in leaves()}
    assert old not in names and recent in names
    remaining = {flow_node.id, young.id, dead_letter.id}
    assert set(JobRecord.objects.values_list("id", flat=True)) == remaining
    # The running flow's node moved to the default leaf, with its log line and step.
    assert leaf_of(flow_node.id) == history.default_leaf("succeeded")
    assert set(JobLog.objects.values_list("job_id", flat=True)) == remaining
    assert set(JobStep.objects.values_list("job_id", flat=True)) == remaining


def test_a_leaf_not_yet_counted_by_the_rollup_stays(conninfo: str) -> None:
    windows(succeeded=60)
    now = database_now()
    rolled_up_to(now - 3 * HOUR)
    old = add_leaf("succeeded", now - 3 * HOUR, now - 2 * HOUR)
    JobRecord.objects.bulk_create([history_row(now - 2.5 * HOUR)])

    kept = run_service(conninfo, keep_partitions)

    assert kept.dropped == 0 and old in {leaf.name for leaf in leaves()}
    assert JobRecord.objects.count() == 1


def test_a_drop_gives_way_to_a_transaction_writing_the_leaf_and_comes_back(
    conninfo: str,
) -> None:
    windows(succeeded=60)
    now = database_now()
    rolled_up_to(now)
    old = add_leaf("succeeded", now - 3 * HOUR, now - 2 * HOUR)
    row = history_row(now - 2.5 * HOUR)
    JobRecord.objects.bulk_create([row, history_row(now - 2.5 * HOUR)])
    holding, release = threading.Event(), threading.Event()

    def redrive_in_progress() -> None:
        with psycopg.connect(conninfo) as conn:  # one open transaction, as a redrive's
            conn.execute("DELETE FROM queue_engine_jobrecord WHERE id = %s", [row.id])
            holding.set()
            release.wait(30)
            conn.rollback()

    other = threading.Thread(target=redrive_in_progress)
    other.start()
    try:
        assert holding.wait(10)
        started = datetime.now(UTC)
        first = run_service(conninfo, keep_partitions)
        waited = datetime.now(UTC) - started
    finally:
        release.set()
        other.join()
    second = run_service(conninfo, keep_partitions)

    # It gave way (leaves it attaches ahead meanwhile may wait on that transaction too).
    assert first.dropped == 0 and first.waited >= 1
    assert waited < timedelta(seconds=2)  # it gave up after its lock_timeout
    assert second.dropped == 1 and old not in {leaf.name for leaf in leaves()}
    assert not JobRecord.objects.exists()


def test_leaves_span_a_quarter_of_the_longest_window_on_a_ladder() -> None:
    assert history.span_for(3600) == 900
    assert history.span_for(86400) == 6 * 3600
    assert history.span_for(7 * 86400) == 86400
    assert history.span_for(30) == 60
    now = datetime(2026, 12, 4, 18, 39, 19, tzinfo=UTC)
    ranges = history.missing_ranges([], now, 900)
    assert ranges[0] == (now + history.LEAD, datetime(2026, 12, 4, 18, 45, tzinfo=UTC))
    assert all(lo == hi for (_, hi), (lo, _) in pairwise(ranges))
    assert ranges[-1][1] >= now + history.AHEAD


def test_an_ended_flow_goes_with_its_last_node(conninfo: str) -> None:
    windows(succeeded=3600)
    now = database_now()
    rolled_up_to(now)
    old = add_leaf("succeeded", now - 3 * HOUR, now - 2 * HOUR)
    emptied, still_kept = (FlowRun.objects.create(name=n, state="failed") for n in ("a", "b"))
    nodes = [
        history_row(now - 2.5 * HOUR, flow=emptied),
        history_row(now - 2.5 * HOUR, flow=still_kept),
    ]
    dead = history_row(now - 2.5 * HOUR, state="failed", flow=still_kept)  # a week's window
    JobRecord.objects.bulk_create([*nodes, dead])
    FlowEdge.objects.bulk_create(
        [
            FlowEdge(flow_id=emptied.pk, parent_id=nodes[0].id, child_id=nodes[0].id + 1),
            FlowEdge(flow_id=still_kept.pk, parent_id=nodes[1].id, child_id=dead.id),
        ]
    )

    kept = run_service(conninfo, keep_partitions)

    assert kept.dropped == 1 and old not in {leaf.name for leaf in leaves()}
    assert list(FlowRun.objects.values_list("name", flat=True)) == ["b"]
    assert list(FlowEdge.objects.values_list("flow_id", flat=True)) == [still_kept.pk]


def test_leaves_ahead_are_made_again_when_the_windows_shrink(conninfo: str) -> None:
    windows(succeeded=7 * 86400)  # leaves of a day
    run_service(conninfo, keep_partitions)
    now = database_now()
    # By bounds, not names: a leaf of a minute made again at a 6-hour boundary takes the
    # name of the leaf of hours it replaces (a leaf is named by its state and its start).
    ahead = {(leaf.name, leaf.hi) for leaf in leaves() if leaf.lo > now + history.LEAD}
    assert ahead

    windows(succeeded=600, failed=600, cancelled=600)  # leaves of a minute
    run_service(conninfo, keep_partitions)

    after = [leaf for leaf in leaves() if leaf.lo > now + history.LEAD]
    assert not ahead & {(leaf.name, leaf.hi) for leaf in after}
    assert all(leaf.hi - leaf.lo <= timedelta(minutes=1) for leaf in after)


def test_a_leaf_left_detached_by_a_stopped_leader_is_dropped(conninfo: str) -> None:
    now = database_now()
    name = add_leaf("succeeded", now - 3 * HOUR, now - 2 * HOUR)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {history.state_table('succeeded')} DETACH PARTITION {name}")

    run_service(conninfo, keep_partitions)

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        assert cursor.fetchone()[0] is None


def test_log_lines_are_written_to_leaves_that_go_after_the_longest_window(
    conninfo: str,
) -> None:
    windows(succeeded=3600, failed=7200, cancelled=3600)  # the log lines: 2 hours
    now = database_now()
    rolled_up_to(now)
    old = add_leaf(history.LOG, now - 4 * HOUR, now - 3 * HOUR)
    recent = add_leaf(history.LOG, now - 90 * timedelta(minutes=1), now - HOUR)
    JobLog.objects.bulk_create(
        JobLog(job_id=1, attempt=1, seq=i, stream="log", text="hi", at=at)
        for i, at in enumerate([now - 3.5 * HOUR, now - 80 * timedelta(minutes=1)])
    )

    kept = run_service(conninfo, keep_partitions)

    names = {leaf.name for leaf in leaves()}
    assert old not in names and recent in names and kept.dropped == 1
    assert list(JobLog.objects.values_list("seq", flat=True)) == [1]
