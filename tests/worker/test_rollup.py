"""The metrics rollup (worker/services/rollup.py): minute and hour buckets that match the
raw history rows, counted once however late a row commits."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection

from queue_engine import sql
from queue_engine.models import (
    JobRecord,
    MetricBucket,
    RollupState,
)
from queue_engine.worker.services import Rollup, roll_up, rollup, rollup_slices
from tests.support.history import database_now, history_row, rolled_up_to
from tests.support.services import run_service
from tests.support.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def percentile_cont(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def approx(value: float | None) -> Any:
    return None if value is None else pytest.approx(value)


def expected_minutes(records: list[JobRecord]) -> dict[tuple[Any, ...], dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[JobRecord]] = defaultdict(list)
    for r in records:
        minute = r.finished_at.astimezone(UTC).replace(second=0, microsecond=0)
        groups[(minute, r.queue, r.kind)].append(r)
    expected = {}
    for key, rows in groups.items():
        started = [(r.started_at, r) for r in rows if r.started_at is not None]
        waits = [(at - r.run_at).total_seconds() for at, r in started]
        runs = [(r.finished_at - at).total_seconds() for at, r in started]
        expected[key] = {
            "succeeded": sum(r.state == "succeeded" for r in rows),
            "failed": sum(r.state == "failed" for r in rows),
            "cancelled": sum(r.state == "cancelled" for r in rows),
            "retried": sum(max(r.attempt - 1, 0) for r in rows),
            "timed": len(started),
            "wait_sum": pytest.approx(sum(waits)),
            "run_sum": pytest.approx(sum(runs)),
            "wait_p50": approx(percentile_cont(waits, 0.5)),
            "wait_p95": approx(percentile_cont(waits, 0.95)),
            "run_p50": approx(percentile_cont(runs, 0.5)),
            "run_p95": approx(percentile_cont(runs, 0.95)),
        }
    return expected


def buckets(size: int) -> dict[tuple[Any, ...], dict[str, Any]]:
    fields = [
        "succeeded",
        "failed",
        "cancelled",
        "retried",
        "timed",
        "wait_sum",
        "run_sum",
        "wait_p50",
        "wait_p95",
        "run_p50",
        "run_p95",
    ]
    return {
        (b["bucket"].astimezone(UTC), b["queue"], b["kind"]): {f: b[f] for f in fields}
        for b in MetricBucket.objects.filter(size=size).values("bucket", "queue", "kind", *fields)
    }


def random_records(
    now: datetime, n: int, rng: random.Random, span: timedelta = timedelta(hours=3)
) -> list[JobRecord]:
    records = []
    for _ in range(n):
        state = rng.choices(["succeeded", "failed", "cancelled"], [8, 1, 1])[0]
        never_started = state == "cancelled" and rng.random() < 0.5
        records.append(
            history_row(
                now - span * rng.random() - timedelta(seconds=2),
                queue=rng.choice(["a", "b", "c"]),
                kind=rng.choice(["tests.noop", "tests.add"]),
                state=state,
                wait=rng.expovariate(1 / 3),
                run=None if never_started else rng.expovariate(1 / 2),
                attempt=rng.choice([1, 1, 1, 2, 3]),
            )
        )
    return records


def watermark_now() -> datetime:
    watermark = RollupState.objects.get().rolled_up_to
    assert watermark is not None
    return watermark.astimezone(UTC)


def closed(records: list[JobRecord], watermark: datetime) -> list[JobRecord]:
    """The records of the minutes a rollup up to `watermark` counts (the open one waits)."""
    return [r for r in records if r.finished_at < watermark]


def away_from_a_watermark_step() -> datetime:
    """The database's now, at least 15 s before the watermark next moves on a minute.

    Two passes that straddle that step roll up to different minutes, which says nothing
    about the rollup; the test waits the step out instead."""

    def away() -> datetime | None:
        now = database_now()  # the test runs in autocommit: now() is the clock
        settled = now - rollup.SETTLED
        return now if 60 - settled.second - settled.microsecond / 1e6 >= 15 else None

    moment: datetime = wait_for(away, timeout=20, interval=0.2, message="the watermark's step")
    return moment


def test_the_rollup_matches_the_raw_rows(conninfo: str) -> None:
    now = away_from_a_watermark_step()
    records = random_records(now, 3000, random.Random(5))
    JobRecord.objects.bulk_create(records)

    first = run_service(conninfo, roll_up)
    second = run_service(conninfo, roll_up)

    watermark = watermark_now()
    assert buckets(60) == expected_minutes(closed(records, watermark))
    hours: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for (minute, queue, kind), values in buckets(60).items():
        hours[(minute.replace(minute=0), queue, kind)].append(values)
    rolled_hours = buckets(3600)
    assert set(rolled_hours) == set(hours)
    for key, minutes in hours.items():
        for name in ("succeeded", "failed", "cancelled", "retried", "timed"):
            assert rolled_hours[key][name] == sum(m[name] for m in minutes)
        timed = sum(m["timed"] for m in minutes)
        if timed == 0:  # e.g. an hour's few rows were all cancelled before they started
            assert rolled_hours[key]["run_p95"] is None
            continue
        weighted = sum((m["run_p95"] or 0) * m["timed"] for m in minutes) / timed
        assert rolled_hours[key]["run_p95"] == pytest.approx(weighted)
    # Only closed minutes: the watermark is the end of the last minute that closed at
    # least rollup.SETTLED ago.
    assert first.rolled_up_to == second.rolled_up_to == watermark
    assert watermark.second == 0 and watermark.microsecond == 0
    assert now - timedelta(minutes=1) - rollup.SETTLED <= watermark <= now - rollup.SETTLED


@pytest.mark.parametrize("pace", [False, True], ids=["one statement", "paced slices"])
def test_a_busy_minutes_percentiles_come_from_a_sample_and_its_counts_from_every_row(
    conninfo: str, monkeypatch: pytest.MonkeyPatch, pace: bool
) -> None:
    monkeypatch.setattr(rollup, "SAMPLE", 2000)
    monkeypatch.setattr(rollup_slices, "PAUSE", 0.0)
    monkeypatch.setattr(rollup, "PACED_SPAN", timedelta(minutes=10))
    minute = (database_now() - timedelta(minutes=3)).replace(second=0, microsecond=0)
    if pace:  # caught up to that minute: the next pass is a paced one
        rolled_up_to(minute)
    rng = random.Random(13)
    busy = [
        history_row(
            minute + timedelta(seconds=59 * rng.random()),
            queue="busy",
            wait=10 * rng.random(),
            run=rng.random(),
        )
        for _ in range(8000)
    ]
    quiet = random_records(minute + timedelta(seconds=59), 300, rng, span=timedelta(seconds=50))
    JobRecord.objects.bulk_create(busy + quiet)

    run_service(conninfo, roll_up, pace=pace)

    rolled = buckets(60)
    expected = expected_minutes(busy + quiet)
    key = (minute, "busy", "tests.noop")
    started = [(r, r.started_at) for r in busy if r.started_at is not None]
    waits = [(at - r.run_at).total_seconds() for r, at in started]
    runs = [(r.finished_at - at).total_seconds() for r, at in started]
    exact = {
        "wait_p50": percentile_cont(waits, 0.5),
        "wait_p95": percentile_cont(waits, 0.95),
        "run_p50": percentile_cont(runs, 0.5),
        "run_p95": percentile_cont(runs, 0.95),
    }
    sampled = {name: rolled[key].pop(name) for name in exact}
    # Counts and sums are exact; the percentiles are those of about 2,000 of the 8,000
    # rows (within 0.1 is over four standard errors), and not all equal to the whole
    # minute's (or they were not sampled).
    assert rolled[key] == {k: v for k, v in expected.pop(key).items() if k not in exact}
    assert sampled == {k: pytest.approx(v, rel=0.1) for k, v in exact.items()}
    assert sampled != {k: pytest.approx(v, rel=1e-9) for k, v in exact.items()}
    # Buckets of up to SAMPLE rows keep exact percentiles.
    assert {k: v for k, v in rolled.items() if k != key} == expected


def test_a_rollup_with_no_newly_closed_minute_reads_nothing(conninfo: str) -> None:
    now = database_now()
    JobRecord.objects.bulk_create(random_records(now, 200, random.Random(9)))
    run_service(conninfo, roll_up)
    watermark = watermark_now()
    MetricBucket.objects.all().delete()  # would come back if the next pass read the history

    again = run_service(conninfo, roll_up)

    if database_now() - rollup.SETTLED < watermark + timedelta(minutes=1):
        assert again.rolled_up_to == watermark and not MetricBucket.objects.exists()
    else:  # a minute closed between the two passes (the test ran across its end)
        assert again.rolled_up_to == watermark + timedelta(minutes=1)


def test_the_rollup_is_incremental_and_counts_late_rows_once(conninfo: str) -> None:
    now = database_now()
    rng = random.Random(7)
    records = random_records(now, 500, rng, span=timedelta(hours=5))
    JobRecord.objects.bulk_create(records)
    run_service(conninfo, roll_up)
    watermark = watermark_now()

    late = [
        history_row(watermark - timedelta(seconds=30), queue="a"),  # committed after its finish
        *random_records(database_now(), 50, rng, span=timedelta(seconds=1)),
    ]
    JobRecord.objects.bulk_create(late)
    # As if the next minute had closed: its pass reads the minute before it again.
    RollupState.objects.update(rolled_up_to=watermark - timedelta(minutes=1))
    run_service(conninfo, roll_up)
    run_service(conninfo, roll_up)

    counted = closed(records + late, watermark_now())
    assert late[0] in counted
    assert buckets(60) == expected_minutes(counted)
    assert sum(
        b["succeeded"] + b["failed"] + b["cancelled"] for b in buckets(3600).values()
    ) == len(counted)


def six_minutes_rolled_up(
    conninfo: str, monkeypatch: pytest.MonkeyPatch, rng: random.Random, n: int
) -> tuple[list[JobRecord], datetime]:
    """`n` rows over the last six minutes, rolled up in one statement, and paced passes
    made instant and allowed over ten minutes: the rows and the watermark."""
    monkeypatch.setattr(rollup_slices, "PAUSE", 0.0)
    monkeypatch.setattr(rollup, "PACED_SPAN", timedelta(minutes=10))
    records = random_records(away_from_a_watermark_step(), n, rng, span=timedelta(minutes=6))
    JobRecord.objects.bulk_create(records)
    run_service(conninfo, roll_up)
    return records, watermark_now()


def test_a_paced_pass_counts_what_the_one_statement_pass_counts_and_late_rows_once(
    conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, watermark = six_minutes_rolled_up(conninfo, monkeypatch, random.Random(17), 600)
    whole = buckets(60)

    late = [history_row(watermark - timedelta(seconds=20), queue="a", kind="tests.add")]
    JobRecord.objects.bulk_create(late)
    # As if the last three minutes had not been rolled up: a paced pass computes them,
    # and the minute before them again, for its late row.
    RollupState.objects.update(rolled_up_to=watermark - timedelta(minutes=3))
    MetricBucket.objects.filter(bucket__gte=watermark - timedelta(minutes=3)).delete()
    paced = run_service(conninfo, roll_up, pace=True)

    counted = closed(records + late, watermark_now())
    assert paced.rolled_up_to == watermark_now() >= watermark
    assert buckets(60) == expected_minutes(counted)
    assert set(buckets(60)) == set(whole) | {(watermark - timedelta(minutes=1), "a", "tests.add")}
    assert sum(
        b["succeeded"] + b["failed"] + b["cancelled"] for b in buckets(3600).values()
    ) == len(counted)


def test_a_paced_pass_counts_the_minute_before_it_again_only_if_it_may_have_missed_rows(
    conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, watermark = six_minutes_rolled_up(conninfo, monkeypatch, random.Random(23), 300)

    # Nothing else is open in this database: the pass reads its minutes whole.
    RollupState.objects.update(rolled_up_to=watermark - timedelta(minutes=2))
    whole = rollup.Whole()
    run_service(conninfo, roll_up, pace=True, whole=whole)
    assert whole.through == watermark_now() == watermark

    # A row in the minute before the watermark that its pass did not count: what the
    # count of that minute again would find. After a pass that read whole, no transaction
    # can add such a row, and the next pass does not look; after any other, it does.
    before = watermark - timedelta(minutes=2)
    late = [history_row(before + timedelta(seconds=30), queue="a", kind="tests.add")]
    JobRecord.objects.bulk_create(late)
    for through, counted in ((before + timedelta(minutes=1), records), (None, records + late)):
        RollupState.objects.update(rolled_up_to=before + timedelta(minutes=1))
        run_service(conninfo, roll_up, pace=True, whole=rollup.Whole(through))
        assert buckets(60) == expected_minutes(closed(counted, watermark_now()))


def test_a_transaction_open_since_before_a_moment_keeps_the_rollup_counting_again(
    conninfo: str, other_connection: psycopg.Connection
) -> None:
    def nothing_open_before(moment: datetime) -> bool:
        with psycopg.connect(conninfo, autocommit=True) as probe:
            row = probe.execute(sql.NOTHING_OPEN_BEFORE, {"moment": moment}).fetchone()
            assert row is not None
            return bool(row[0])

    later = database_now() + timedelta(minutes=1)
    assert nothing_open_before(later)
    with other_connection.transaction():
        other_connection.execute("SELECT 1")
        assert not nothing_open_before(later)
        assert nothing_open_before(database_now() - timedelta(minutes=1))
    assert nothing_open_before(later)


def test_the_leaders_rollup_catches_up_inline_then_paces_in_the_background(
    conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollup_slices, "PAUSE", 0.0)
    records = random_records(database_now(), 300, random.Random(19), span=timedelta(minutes=10))
    JobRecord.objects.bulk_create(records)
    calls: list[Any] = []

    async def leader() -> None:
        service = Rollup(conninfo)
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        try:
            calls.append(await service.step(conn))  # no watermark yet: inline, on this connection
            calls.append(service.task)
            await conn.execute(
                "UPDATE queue_engine_rollupstate SET rolled_up_to = rolled_up_to - interval '1 minute'"
            )
            calls.append(await service.step(conn))  # one minute behind: paced, in the background
            assert service.task is not None
            await service.task
        finally:
            await service.close()
            await conn.close()

    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(asyncio.run, leader()).result()

    assert isinstance(calls[0], rollup.RolledUp) and calls[1] is None and calls[2] is None
    assert buckets(60) == expected_minutes(closed(records, watermark_now()))


def test_a_first_rollup_over_a_long_history_goes_in_hour_chunks(conninfo: str) -> None:
    now = database_now()
    records = random_records(now, 400, random.Random(3), span=timedelta(hours=30))
    JobRecord.objects.bulk_create(records)

    passes = []
    while True:
        result = run_service(conninfo, roll_up, budget=0)
        passes.append(result)
        if not result.more:
            break

    assert len(passes) >= 30
    totals = MetricBucket.objects.filter(size=3600).values_list("succeeded", "failed", "cancelled")
    assert sum(map(sum, totals)) == len(closed(records, watermark_now()))


def test_a_rollup_whose_passes_slow_down_counts_every_row_once(
    conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every pass counts as slow: the chunk halves from an hour to 7.5 minutes and less,
    # so passes end in the middle of a minute.
    monkeypatch.setattr(rollup, "FAST_PASS", 0.0)
    monkeypatch.setattr(rollup, "SLOW_PASS", 0.0)
    now = database_now()
    records = random_records(now, 2000, random.Random(11), span=timedelta(hours=2))
    JobRecord.objects.bulk_create(records)

    done = run_service(conninfo, roll_up, budget=30)

    # Each slow pass still moves on (at least a minute): two hours take about 120 passes,
    # not the whole budget spent re-reading the same minute.
    assert not done.more and done.passes < 300
    counted = closed(records, watermark_now())
    assert buckets(60) == expected_minutes(counted)
    totals = MetricBucket.objects.filter(size=3600).values_list("succeeded", "failed", "cancelled")
    assert sum(map(sum, totals)) == len(counted)


def test_the_rollup_summarizes_the_history_it_reads_by_finish_time(conninfo: str) -> None:
    JobRecord.objects.bulk_create(random_records(database_now(), 20_000, random.Random(17)))
    with connection.cursor() as cursor:
        cursor.execute(sql.SUMMARIZE_FINISHED)
        assert cursor.fetchone()[0] > 0  # the test's rows were not summarized yet
    JobRecord.objects.bulk_create(random_records(database_now(), 20_000, random.Random(18)))

    run_service(conninfo, roll_up)

    # Nothing left to summarize, in any leaf of the history: the rollup's and retention's
    # range reads skip the pages outside their range instead of reading every
    # unsummarized one.
    with connection.cursor() as cursor:
        cursor.execute(sql.SUMMARIZE_FINISHED)
        assert cursor.fetchone()[0] == 0
