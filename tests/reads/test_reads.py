"""The console's read side: queue counts, metric series and the job list."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queue_engine import reads
from queue_engine.models import Job, JobRecord, QueueConfig
from queue_engine.reads import FilterError, JobFilter
from queue_engine.schema import partitions as history
from queue_engine.worker.services import roll_up
from tests.support import jobs
from tests.support.history import database_now, history_row
from tests.support.services import run_service

pytestmark = pytest.mark.django_db(transaction=True)


# --- counts -----------------------------------------------------------------------------


def test_queue_counts_are_exact_under_the_cap_and_estimated_above_it(conninfo: str) -> None:
    jobs.noop.using(queue="q1").enqueue()
    jobs.noop.using(queue="q1", delay=60).enqueue()
    QueueConfig.objects.create(name="q2", paused=True)
    now = database_now()
    JobRecord.objects.bulk_create(
        [history_row(now - timedelta(minutes=5), queue="q1") for _ in range(30)]
        + [history_row(now, queue="q1", state="failed")]
    )
    run_service(conninfo, roll_up)

    exact = {c.queue: c for c in reads.queue_counts()}
    capped = reads.queue_counts("q1", cap=10)[0]

    assert exact["q1"].states["available"] == reads.StateCount(1, True)
    assert exact["q1"].states["scheduled"].count == 1 and exact["q1"].live == 2
    assert exact["q1"].states["succeeded"] == reads.StateCount(30, True)
    assert exact["q2"].paused and exact["q2"].live == 0
    assert capped.states["succeeded"] == reads.StateCount(30, False)  # from the rollup
    assert capped.states["failed"] == reads.StateCount(1, True)


def live_jobs(queue: str, state: str, n: int) -> None:
    Job.objects.bulk_create(
        Job(kind="tests.noop", queue=queue, state=state, pending_deps=state == "blocked")
        for _ in range(n)
    )


def test_live_counts_past_the_scan_limit_are_capped_or_estimated() -> None:
    live_jobs("big", "available", 30)
    live_jobs("big", "running", 3)
    live_jobs("big", "scheduled", 20)
    live_jobs("big", "blocked", 10)
    live_jobs("small", "available", 2)
    live_jobs("small", "scheduled", 1)

    everything = {c.queue: c.states for c in reads.queue_counts(cap=5)}
    bounded = {c.queue: c.states for c in reads.queue_counts(cap=5, scan=40)}
    one = reads.queue_counts("small", cap=5, scan=40)

    assert everything["big"]["available"] == reads.StateCount(30, True)  # 66 jobs <= scan
    assert everything["big"]["blocked"] == reads.StateCount(10, True)
    big, small = bounded["big"], bounded["small"]
    assert big["available"].count >= 6 and not big["available"].exact  # above the cap
    assert big["running"] == reads.StateCount(3, True)  # under it, through the index
    assert small["available"] == reads.StateCount(2, True)
    assert small["running"] == reads.StateCount(0, True)
    assert big["scheduled"] == reads.StateCount(20, True)  # 21 scheduled <= scan
    assert small["scheduled"] == reads.StateCount(1, True)
    assert big["blocked"].count >= 6 and not big["blocked"].exact  # above the cap
    assert small["blocked"] == reads.StateCount(0, True)  # under it, through the index
    assert [c.queue for c in one] == ["small"] and one[0].states == small


# --- series -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "step", "points"),
    [
        (timedelta(minutes=15), 60, 15),
        (timedelta(hours=1), 60, 60),
        (timedelta(hours=6), 300, 72),
        (timedelta(days=1), 900, 96),
        (timedelta(days=7), 3600, 168),
        (timedelta(days=30), 21600, 120),
    ],
)
def test_every_window_gets_a_step_giving_at_most_200_points(window, step, points) -> None:  # type: ignore[no-untyped-def]
    series = reads.metric_series(window)

    assert series.step == timedelta(seconds=step)
    assert len(series.points) in (points, points + 1)
    assert all(p.ended == 0 and p.wait_avg is None for p in series.points)  # zero-filled
    gaps = {b.at - a.at for a, b in zip(series.points, series.points[1:], strict=False)}
    assert gaps == {series.step}


@pytest.mark.parametrize("window", [timedelta(minutes=5), timedelta(days=31)])
def test_windows_outside_15_minutes_to_30_days_are_refused(window: timedelta) -> None:
    with pytest.raises(FilterError, match="from 15 minutes to 30 days"):
        reads.metric_series(window)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: reads.metric_series(900), "A series window is a timedelta"),  # type: ignore[arg-type]
        (lambda: reads.metric_series("1h"), "not str '1h'"),  # type: ignore[arg-type]
        (
            lambda: reads.metric_series(timedelta(hours=1), queue=5),  # type: ignore[arg-type]
            "A series queue is a queue name or None, not 5.",
        ),
        (
            lambda: reads.metric_series(timedelta(hours=1), kind=["a"]),  # type: ignore[arg-type]
            "A series kind is a job kind name or None",
        ),
        (lambda: reads.queue_series(3600, ["a"]), "A series window is a timedelta"),  # type: ignore[arg-type]
        (
            lambda: reads.queue_series(timedelta(hours=1), "emails"),
            "takes a list of queue names, such as ['emails'], not 'emails'.",
        ),
    ],
)
def test_bad_series_arguments_raise_tracking_error_saying_what_to_give(
    call: Callable[[], Any], message: str
) -> None:
    with pytest.raises(FilterError) as caught:
        call()

    assert message in str(caught.value)


def test_series_stitch_the_rollup_with_the_live_tail(conninfo: str) -> None:
    now = database_now()
    rolled = [
        history_row(now - timedelta(minutes=m), queue="s", run=2.0, wait=1.0)
        for m in range(3, 50, 2)
    ]
    JobRecord.objects.bulk_create(rolled)
    run_service(conninfo, roll_up)
    tail = [
        history_row(database_now(), queue="s", state="failed", run=4.0, wait=1.0) for _ in range(3)
    ]
    JobRecord.objects.bulk_create(tail)

    series = reads.metric_series(timedelta(hours=1), queue="s")
    other = reads.metric_series(timedelta(hours=1), queue="nothing-here")

    assert sum(p.succeeded for p in series.points) == len(rolled)
    assert sum(p.failed for p in series.points) == 3 and series.points[-1].failed == 3
    assert series.points[-1].run_avg == pytest.approx(4.0)
    busy = [p for p in series.points if p.succeeded]
    assert all(p.run_p50 == pytest.approx(2.0) and p.wait_p95 == pytest.approx(1.0) for p in busy)
    assert sum(p.ended for p in other.points) == 0


def test_queue_series_reads_each_queues_series_at_once(conninfo: str) -> None:
    now = database_now()
    JobRecord.objects.bulk_create(
        [history_row(now - timedelta(minutes=m), queue="a") for m in range(3, 40, 3)]
        + [history_row(now - timedelta(minutes=m), queue="b", state="failed") for m in (5, 6)]
    )
    run_service(conninfo, roll_up)
    JobRecord.objects.bulk_create([history_row(database_now(), queue="b")])  # the live tail
    window = timedelta(hours=1)

    series = reads.queue_series(window, ["a", "b", "nothing-here", "a"])

    assert list(series) == ["a", "b", "nothing-here"]
    for name in ("a", "b", "nothing-here"):
        assert series[name] == reads.metric_series(window, queue=name)
    assert sum(p.ended for p in series["a"].points) == 13
    assert sum(p.failed for p in series["b"].points) == 2
    assert sum(p.succeeded for p in series["b"].points) == 1
    assert reads.queue_series(window, []) == {}


# --- job list -------------------------------------------------------------------------------


@pytest.fixture
def mixed_jobs() -> list[int]:
    """60 ended and 60 live jobs, interleaved by id, in two queues."""
    now = database_now()
    ids, ended_jobs = [], []
    for i in range(60):
        ended = history_row(
            now - timedelta(minutes=i),
            queue=("red", "blue")[i % 2],
            state=("succeeded", "failed", "cancelled")[i % 3],
        )
        ended.name = f"report {i} 100%_done" if i == 7 else f"report {i}"
        ended.payload, ended.meta = {"account": i % 5}, {"tenant": f"t{i % 3}"}
        ended.id = 2 * i + 1
        ended_jobs.append(ended)
        live = Job.objects.create(
            id=2 * i + 2,
            kind="tests.noop",
            queue=("red", "blue")[i % 2],
            name=f"live {i}",
            payload={"account": i % 5},
        )
        ids += [ended.id, live.id]
    JobRecord.objects.bulk_create(ended_jobs)
    return sorted(ids, reverse=True)


def every_page(where: JobFilter | None = None, limit: int = 25) -> list[int]:
    where = where or JobFilter()
    seen: list[int] = []
    page = reads.list_jobs(where, limit=limit)
    while True:
        seen += [j.id for j in page.jobs]
        if page.older is None:
            return seen
        page = reads.list_jobs(where, before=page.older, limit=limit)


def test_keyset_pages_cover_live_and_ended_jobs_once_newest_first(mixed_jobs: list[int]) -> None:
    first = reads.list_jobs(limit=25)
    second = reads.list_jobs(before=first.older, limit=25)
    back = reads.list_jobs(after=second.newer, limit=25)

    assert every_page() == mixed_jobs
    assert first.newer is None and second.newer == second.jobs[0].id
    assert [j.id for j in back.jobs] == [j.id for j in first.jobs]
    assert back.newer is None


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (
            JobFilter(queue="red", state="failed"),
            lambda j: j.queue == "red" and j.state == "failed",
        ),
        (JobFilter(state="available"), lambda j: j.state == "available"),
        (JobFilter(text="100%_d"), lambda j: "100%_d" in j.name),
        (JobFilter(text="REPORT 1"), lambda j: j.name.startswith("report 1")),
        (JobFilter(payload={"account": 3}), lambda j: j.payload == {"account": 3}),
        (JobFilter(meta={"tenant": "t2"}), lambda j: j.meta.get("tenant") == "t2"),
        (JobFilter(kind="tests.noop", queue="blue"), lambda j: j.queue == "blue"),
    ],
)
def test_filters_combine_over_live_and_ended_jobs(
    mixed_jobs: list[int], where: JobFilter, expected: Callable[[Any], bool]
) -> None:
    every = [*Job.objects.all(), *JobRecord.objects.all()]

    found = every_page(where, limit=7)

    assert found == sorted((j.id for j in every if expected(j)), reverse=True)
    assert found


@pytest.mark.parametrize(("since", "until"), [(30, 10), (50, 45)])  # near now; far from it
def test_a_time_range_bounds_end_times_of_ended_jobs(
    mixed_jobs: list[int], since: int, until: int
) -> None:
    now = database_now()
    start, end = now - timedelta(minutes=since), now - timedelta(minutes=until)

    found = every_page(JobFilter(state="succeeded", since=start, until=end), limit=3)

    ended = JobRecord.objects.filter(state="succeeded", finished_at__gte=start, finished_at__lt=end)
    assert found == sorted(ended.values_list("id", flat=True), reverse=True) and found


def listed(_: int) -> list[tuple[int, str]]:
    return [(j.id, j.state) for j in reads.list_jobs().jobs]


def found(job_id: int) -> list[tuple[int, str]]:
    from queue_engine import reads

    job = reads.find_job(job_id)
    return [] if job is None else [(job.id, job.state)]


def states(job_id: int) -> list[tuple[int, str]]:
    from queue_engine import reads

    return sorted(reads.job_states([job_id]).items())


@pytest.mark.parametrize(
    ("read", "move"),
    # find_job reads the live table first: a job still there is found before it ends.
    [(listed, "cancel"), (listed, "redrive"), (states, "cancel"), (states, "redrive"),
     (found, "redrive")],
)  # fmt: skip
def test_a_job_moving_between_live_and_history_while_it_is_read_is_seen_once(
    transactional_db: None,
    other_connection: Any,
    read: Callable[[int], list[tuple[int, str]]],
    move: str,
) -> None:
    """A job keeps its id when it ends (live to history) and when it is redriven (back)."""
    from django.db import transaction

    from queue_engine import ops

    job = jobs.noop.enqueue()
    if move == "redrive":
        ops.cancel_job(job.id)

    def read_and_close() -> list[tuple[int, str]]:
        try:
            return read(job.id)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as thread:
        with transaction.atomic():
            # The history is held while the job is read, and the job moves meanwhile.
            with connection.cursor() as cursor:
                cursor.execute("LOCK TABLE queue_engine_jobrecord IN ACCESS EXCLUSIVE MODE")
            reading = thread.submit(read_and_close)
            deadline = time.monotonic() + 10
            while not other_connection.execute(
                "SELECT 1 FROM pg_locks WHERE NOT granted AND relation = "
                "'queue_engine_jobrecord'::regclass"
            ).fetchone():
                assert time.monotonic() < deadline and not reading.done()
                # This wait's poll interval.
                time.sleep(0.01)
            if move == "cancel":
                ops.cancel_job(job.id)
            else:
                ops.redrive_job(job.id)
        seen = reading.result(timeout=10)

    assert seen == [(job.id, "cancelled" if move == "cancel" else "available")]


def test_text_filter_matches_an_unnamed_jobs_kind_as_displayed() -> None:
    now = database_now()
    unnamed = history_row(now, queue="q", kind="app.send_invoice")
    named = history_row(now, queue="q", kind="app.send_invoice")
    named.name = "monthly run"
    JobRecord.objects.bulk_create([unnamed, named])
    waiting = Job.objects.create(id=named.id + 1, kind="app.send_invoice", queue="q")
    other = Job.objects.create(
        id=named.id + 2, kind="app.other", queue="q", name="invoice reminder"
    )

    by_kind = reads.list_jobs(JobFilter(text="SEND_INV"))
    by_name = reads.list_jobs(JobFilter(text="invoice"))
    history_only = reads.list_jobs(JobFilter(text="send_inv", state="succeeded"))

    assert [j.display_name for j in by_kind.jobs] == ["app.send_invoice", "app.send_invoice"]
    assert {j.id for j in by_kind.jobs} == {waiting.id, unnamed.id}
    assert {j.id for j in by_name.jobs} == {waiting.id, other.id, unnamed.id}
    assert [j.id for j in history_only.jobs] == [unnamed.id]


def test_unindexed_filters_search_bounded_id_ranges_and_say_where_to_go_on() -> None:
    now = database_now()
    sparse = [history_row(now, queue="q") for _ in range(3)]
    for job, job_id in zip(sparse, (10, 60_010, 120_010), strict=True):
        job.id, job.name = job_id, f"needle {job_id}"
    JobRecord.objects.bulk_create([*sparse, history_row(now, queue="q")])  # ids 10, 60k, 120k, 1M+
    where = JobFilter(text="needle")

    pages = [reads.list_jobs(where, limit=10)]
    while pages[-1].older is not None:
        pages.append(reads.list_jobs(where, before=pages[-1].older, limit=10))
    back = reads.list_jobs(where, after=10, limit=10)

    assert [j.id for p in pages for j in p.jobs] == [120_010, 60_010, 10]
    assert all(p.partial for p in pages[:-1]) and not pages[-1].partial
    assert len(pages) > 3  # some pages searched a range holding no match at all
    assert back.partial and back.jobs == [] and back.newer == 10 + reads.SCAN_IDS


def test_bad_list_requests_say_what_to_do() -> None:
    with pytest.raises(FilterError, match="Unknown state 'done'"):
        reads.list_jobs(JobFilter(state="done"))  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="before or after, not both"):
        reads.list_jobs(before=5, after=1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: reads.list_jobs(
                JobFilter(since=datetime(2026, 1, 1), until=datetime(2026, 1, 2))
            ),
            "since must be a datetime with a time zone",
        ),
        (lambda: reads.list_jobs(before="x"), "before must be a job id"),  # type: ignore[arg-type]
        (lambda: reads.list_jobs(after=10**20), "after must be a job id"),
        (lambda: reads.list_jobs(JobFilter(text="a\x00b")), "text filter must be text"),
        (
            lambda: reads.list_jobs(JobFilter(payload={"a": {1}})),
            "the payload filter .*set",
        ),
        (lambda: reads.queue_counts(5), "queue must be a queue name"),  # type: ignore[arg-type]
    ],
)
def test_bad_filters_are_tracking_errors_not_tracebacks(
    call: Callable[[], object], message: str
) -> None:
    with pytest.raises(FilterError, match=message):
        call()


# --- a million ended jobs -------------------------------------------------------------------

SEED_HISTORY = """
INSERT INTO queue_engine_jobrecord
       (id, queue, kind, name, state, priority, payload, attempt, max_attempts, errors, meta,
        run_at, created_at, started_at, finished_at, worker)
SELECT i, (ARRAY['emails', 'media', 'billing', 'reports'])[1 + i %% 4],
       (ARRAY['app.send', 'app.resize', 'app.charge', 'app.report'])[1 + i %% 4],
       'job ' || i,
       CASE (i / 4) %% 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'succeeded' END,
       0, jsonb_build_object('account', i %% 1000), 1 + (i %% 10 = 0)::int, 20,
       CASE (i / 4) %% 20 WHEN 0 THEN '[{"class": "app.Boom", "message": "boom"}]'::jsonb
            ELSE '[]'::jsonb END,
       jsonb_build_object('tenant', 't' || i %% 50),
       f - interval '3 seconds', f - interval '3 seconds',
       f - make_interval(secs => 0.1 + (i %% 13) / 10.0), f, 'w1'
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT now() - interval '30 days' * (1 - i::float8 / %(n)s)) AS t(f)
"""

SEED_LIVE = """
INSERT INTO queue_engine_job (id, queue, kind, name, state, payload, meta, run_at)
SELECT %(n)s + i, (ARRAY['emails', 'media', 'billing', 'reports'])[1 + i %% 4], 'app.send',
       'live ' || i, (ARRAY['available', 'scheduled', 'running'])[1 + i %% 3],
       jsonb_build_object('account', i %% 1000), '{}', now() + make_interval(secs => i %% 3)
  FROM generate_series(1, 10000) AS i
"""


def timed(what: str, call: Callable[[], Any]) -> Any:
    """Run a read (after one warm-up), print its time and the plan of each query.

    How fast the reads answer is measured by the reads_large bench scenario; the time
    and plans printed here help when one of these checks fails."""
    call()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - started
    print(f"\n=== {what}: {elapsed * 1000:.1f} ms")
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            statement = query["sql"]
            if (
                not statement.lstrip().upper().startswith(("SELECT", "WITH"))
                or "set_config" in statement
            ):
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement)
            print("\n".join(f"    {row[0]}" for row in cursor.fetchall()))
    return result


@pytest.mark.slow
def test_reads_answer_right_on_a_million_ended_jobs(conninfo: str, added_leaves: list[str]) -> None:
    n = 1_000_000
    for name in ("emails", "media", "billing", "reports"):
        QueueConfig.objects.create(
            name=name,
            retain_succeeded=31 * 86400,
            retain_failed=31 * 86400,
            retain_cancelled=31 * 86400,
        )
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # The history's leaves over the month, as a leader would have made them.
        cursor.execute("SELECT now() - interval '31 days'")
        added_leaves += history.backfill_leaves(cursor, cursor.fetchone()[0])
        cursor.execute(SEED_HISTORY, {"n": n})
        cursor.execute(SEED_LIVE, {"n": n})
        cursor.execute("VACUUM ANALYZE queue_engine_jobrecord")
        cursor.execute("ANALYZE queue_engine_job")
    seeded = time.perf_counter()
    run_service(conninfo, roll_up, budget=600)
    print(
        f"\nseeded {n} ended jobs in {seeded - started:.1f} s; "
        f"first rollup of 30 days in {time.perf_counter() - seeded:.1f} s"
    )
    now = database_now()

    counts = timed("queue_counts()", reads.queue_counts)
    by_queue = {c.queue: c for c in counts}
    exact = JobRecord.objects.filter(queue="media", state="succeeded").count()
    assert by_queue["media"].states["succeeded"].exact is False
    assert by_queue["media"].states["succeeded"].count == pytest.approx(exact, rel=0.01)
    assert by_queue["emails"].live == 2500

    for window in (
        timedelta(minutes=15),
        timedelta(hours=1),
        timedelta(days=1),
        timedelta(days=7),
        timedelta(days=30),
    ):
        series = timed(f"metric_series({window})", partial(reads.metric_series, window))
        assert series.points
    month = timed(
        "metric_series(30 days, queue=billing)",
        lambda: reads.metric_series(timedelta(days=30), queue="billing"),
    )
    assert sum(p.ended for p in month.points) == pytest.approx(n / 4, rel=0.02)

    first = timed("list_jobs()", reads.list_jobs)
    timed("list_jobs(before=...)", lambda: reads.list_jobs(before=first.older))
    for where in (
        JobFilter(queue="billing", state="failed"),
        JobFilter(state="cancelled"),
        JobFilter(kind="app.charge"),
        JobFilter(queue="media", state="succeeded", kind="app.resize"),
        JobFilter(text="job 99"),
        JobFilter(meta={"tenant": "t7"}),
        JobFilter(payload={"account": 42}, queue="billing"),
        JobFilter(
            state="succeeded",
            since=now - timedelta(days=12, hours=1),
            until=now - timedelta(days=12),
        ),
    ):
        page = timed(f"list_jobs({where})", partial(reads.list_jobs, where))
        assert page.jobs

    # A rare text: each page searches SCAN_IDS ids; following `older` finds every match.
    needle = JobFilter(text="job 4242")
    expected = sorted(
        JobRecord.objects.filter(name__contains="job 4242").values_list("id", flat=True),
        reverse=True,
    )
    found, page = [], reads.list_jobs(needle)
    while True:
        found += [j.id for j in page.jobs]
        if page.older is None:
            break
        page = reads.list_jobs(needle, before=page.older)
    assert found == expected


SEED_BACKLOG = """
INSERT INTO queue_engine_job (id, queue, kind, state, pending_deps, run_at)
SELECT 100000000 + i, q, 'app.send', st, (st = 'blocked')::int,
       now() + CASE st WHEN 'scheduled' THEN interval '1 day' ELSE interval '0' END
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT CASE WHEN i %% 1000 < 600 THEN 'emails' WHEN i %% 1000 < 900 THEN 'media'
                            WHEN i %% 1000 < 990 THEN 'billing' ELSE 'reports' END,
                       CASE WHEN i %% 1000 < 600 THEN 'available'
                            WHEN i %% 1000 < 900 THEN 'scheduled'
                            WHEN i %% 1000 < 990 THEN 'blocked'
                            WHEN i %% 1000 < 999 THEN 'available' ELSE 'running' END) AS s(q, st)
"""


@pytest.mark.slow
def test_queue_counts_stay_bounded_on_a_million_live_jobs() -> None:
    n = 1_000_000
    with connection.cursor() as cursor:
        cursor.execute(SEED_BACKLOG, {"n": n})
        cursor.execute("VACUUM ANALYZE queue_engine_job")
    live_jobs("tiny", "available", 3)
    live_jobs("tiny", "running", 2)
    live_jobs("tiny", "scheduled", 1)

    counts = {c.queue: c.states for c in timed("queue_counts()", reads.queue_counts)}
    tiny = timed("queue_counts('tiny')", partial(reads.queue_counts, "tiny"))[0].states
    for queue, states in counts.items():
        print(queue, {s: f"{c.count}{'' if c.exact else '~'}" for s, c in states.items()})

    # A sample of 30,000 rows in runs of 600, 300 and 90 alike: about 730 pages of 41 rows.
    assert counts["emails"]["available"].count == pytest.approx(0.6 * n, rel=0.15)
    assert counts["media"]["scheduled"].count == pytest.approx(0.3 * n, rel=0.25)
    assert counts["billing"]["blocked"].count == pytest.approx(0.09 * n, rel=0.5)
    assert counts["reports"]["available"].count > reads.COUNT_CAP
    assert not any(
        counts[q][s].exact
        for q, s in [
            ("emails", "available"),
            ("media", "scheduled"),
            ("billing", "blocked"),
            ("reports", "available"),
        ]
    )
    assert counts["reports"]["running"] == reads.StateCount(1000, True)
    assert (tiny["available"], tiny["running"]) == (
        reads.StateCount(3, True),
        reads.StateCount(2, True),
    )
    assert counts["tiny"]["available"] == tiny["available"]
