"""Schedules: declared idempotently, validated fast, fired once per fire time by the leader."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from django.db.models import F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queue_engine import ops, schedules
from queue_engine.checks import check_schedules
from queue_engine.exceptions import ScheduleError
from queue_engine.models import AuditEvent, Job, JobRecord, Schedule, WorkerProcess
from queue_engine.schedules.recurrence import Recurrence, check_cron
from queue_engine.worker.services import fire_due_schedules
from tests.support import jobs
from tests.support.cron import HOSTILE
from tests.support.services import run_service
from tests.support.workers import wait_for


def fires(name: str) -> list[dict[str, object]]:
    """The meta of every job the schedule enqueued, live or ended, by fire time."""
    metas = [
        *Job.objects.filter(meta__schedule=name).values_list("meta", flat=True),
        *JobRecord.objects.filter(meta__schedule=name).values_list("meta", flat=True),
    ]
    return sorted(metas, key=lambda m: str(m["fire_time"]))


# --- declaring ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_declaring_again_changes_nothing_and_keeps_the_next_fire_time() -> None:
    first = schedules.upsert_interval("report", jobs.noop, every=3600, payload={"x": 1})
    audits = AuditEvent.objects.count()

    again = schedules.upsert_interval("report", jobs.noop, every=3600, payload={"x": 1})

    assert again.next_fire_at == first.next_fire_at
    assert AuditEvent.objects.count() == audits
    assert Schedule.objects.count() == 1


@pytest.mark.django_db
def test_a_changed_timing_moves_the_next_fire_time_and_is_audited() -> None:
    schedules.upsert_interval("report", jobs.noop, every=3600)

    changed = schedules.upsert_cron(
        "report", jobs.noop, cron="30 6 * * *", timezone="Europe/Paris", actor="alice"
    )

    local = changed.next_fire_at.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (6, 30)
    event = AuditEvent.objects.filter(action="schedule_update").get()
    assert event.actor == "alice"
    assert event.details["changes"]["cron"] == [None, "30 6 * * *"]


@pytest.mark.django_db
def test_redeclaring_keeps_an_operators_disable() -> None:
    schedules.upsert_interval("report", jobs.noop, every=60)
    ops.disable_schedule("report", actor="bob")

    schedules.upsert_interval("report", jobs.noop, every=60)

    assert Schedule.objects.get(name="report").enabled is False


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "the minute field '61' is out of range"),
        ({"cron": "* * * *"}, "has 4 fields; give exactly five"),
        ({"cron": "0 0 30 2 *"}, "day 30 never occurs in month 2 (February)"),
        ({"cron": "0 0 32 2 *"}, "the day-of-month field '32' is out of range"),
        ({"cron": "0 0 */31 2 MON#5"}, "never fires"),
        ({"cron": "0 0 * * *", "timezone": "Mars/Olympus"}, "Unknown time zone 'Mars/Olympus'"),
        ({"cron": "0 0 * * *", "timezone": "../../etc/passwd"}, "Unknown time zone"),
        ({"every": 0}, "every must be from 1 second to 366 days"),
        ({"every": float("nan")}, "finite number of seconds"),
        ({"every": "often"}, "every must be a number of seconds or a timedelta"),
        ({"every": 60, "timezone": "Europe/Paris"}, "a time zone only applies to cron"),
        ({"every": 60, "kind": "tests.nope"}, "Unknown job kind 'tests.nope'"),
        ({"every": 60, "payload": {"when": datetime(2020, 1, 1, tzinfo=UTC)}}, "datetime"),
        ({"every": 60, "priority": 500}, "priority must be a whole number from -100 to 100"),
        ({"every": 60, "kind": "tests.add", "payload": {"a": 1}}, "does not fit the arguments"),
        ({"every": 60, "missed": "replay"}, "missed must be 'run_once' or 'skip'"),
        ({"every": 60, "payload": "x"}, "the payload must be a dict of the job's arguments"),
        ({"every": 60, "payload": [["a", 1]]}, "must be a dict of the job's arguments by name"),
    ],
)
def test_a_bad_declaration_says_what_is_wrong_and_writes_nothing(kwargs, message) -> None:  # type: ignore[no-untyped-def]
    kind = kwargs.pop("kind", "tests.noop")

    with pytest.raises(ScheduleError) as caught:
        schedules.save_declaration(schedules.declaration("bad", kind, **kwargs))

    assert message in str(caught.value)
    assert not Schedule.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "0 0 30 2 *",
            "Cron expression '0 0 30 2 *': day 30 never occurs in month 2 (February): this "
            "schedule would never fire; pick a day that month has (L is the last day).",
        ),
        (
            "0 0 31 4 *",
            "Cron expression '0 0 31 4 *': day 31 never occurs in month 4 (April): this "
            "schedule would never fire; pick a day that month has (L is the last day).",
        ),
        (
            "0 0 31 FEB,APR *",
            "Cron expression '0 0 31 FEB,APR *': day 31 never occurs in months FEB,APR "
            "(February, April): this schedule would never fire; pick a day those months have "
            "(L is the last day).",
        ),
        (
            "0 0 30-31 2 *",
            "Cron expression '0 0 30-31 2 *': days 30-31 never occur in month 2 (February): "
            "this schedule would never fire; pick a day that month has (L is the last day).",
        ),
    ],
)
def test_a_day_no_allowed_month_has_is_refused_as_never_occurring(
    expression: str, message: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        check_cron(expression)

    assert str(caught.value) == message


@pytest.mark.parametrize("expression", HOSTILE, ids=lambda e: repr(e[:24]))
def test_hostile_cron_expressions_are_rejected(expression: str) -> None:
    # How fast they are rejected is measured by the cron_checks bench scenario.
    with pytest.raises(ScheduleError):
        check_cron(expression)


ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/St_Johns",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/Sao_Paulo",
    "Pacific/Apia",
]


def field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    single = number.map(str)
    span = st.tuples(number, number).map(lambda t: f"{min(t)}-{max(t)}")
    stepped = st.tuples(st.sampled_from(["*", f"{low}"]), st.integers(1, high)).map(
        lambda t: f"{t[0]}/{t[1]}"
    )
    item = st.one_of(st.just("*"), single, span, stepped)
    return st.lists(item, min_size=1, max_size=3).map(",".join)


CRONS = st.tuples(
    field(0, 59),
    field(0, 23),
    field(1, 31) | st.sampled_from(["L", "*/31"]),
    field(1, 12) | st.just("2"),
    field(0, 7) | st.sampled_from(["MON-FRI", "1#2", "5L", "1#5", "SUN#5"]),
).map(" ".join)
MOMENTS = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cron=CRONS, zone=st.sampled_from(ZONES), now=MOMENTS)
def test_next_fire_is_always_after_now(cron: str, zone: str, now: datetime) -> None:
    try:
        normalised = check_cron(cron)
    except ScheduleError as exc:  # then cronsim agrees: it cannot parse it, or never fires
        if "never fires" in str(exc):
            with pytest.raises(StopIteration):  # its own 50-year search
                next(CronSim(cron, now))
        else:
            with pytest.raises(CronSimError):
                CronSim(cron, now)
        return
    recurrence = Recurrence(cron=normalised, timezone=zone)

    after = recurrence.first_after(now)
    due = recurrence.due(after, after + timedelta(seconds=1))

    assert after > now
    # A rare day (the 5th Monday of February) can be ~40 years away across a century.
    assert after < now + timedelta(days=366 * 50)
    assert due.fire_time == after and due.next_fire_at > after


@given(every=st.integers(1, 366 * 86400), late=st.floats(0, 1e7), scheduled=MOMENTS)
def test_interval_due_times_stay_on_the_grid(every: int, late: float, scheduled: datetime) -> None:
    recurrence = Recurrence(every=timedelta(seconds=every))
    now = scheduled + timedelta(seconds=late)

    due = recurrence.due(scheduled, now)

    assert due.fire_time <= now < due.next_fire_at
    assert due.next_fire_at - due.fire_time == timedelta(seconds=every)
    assert due.fire_time == scheduled + due.missed * timedelta(seconds=every)


# --- operating ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_run_now_enqueues_once_while_pending_and_keeps_the_timing() -> None:
    schedule = schedules.upsert_cron(
        "nightly", jobs.noop, cron="0 3 * * *", payload={"at": "{fire_time}"}
    )

    first = ops.run_schedule_now("nightly", actor="carol")
    second = ops.run_schedule_now("nightly", actor="carol")

    assert second.id == first.id
    assert first.meta["run_now"] is True and first.payload["at"] == first.meta["fire_time"]
    assert Schedule.objects.get(name="nightly").next_fire_at == schedule.next_fire_at
    assert AuditEvent.objects.filter(action="schedule_run_now", actor="carol").count() == 2


@pytest.mark.django_db
def test_enable_disable_remove_are_audited_and_refuse_unknown_names() -> None:
    schedules.upsert_interval("beat", jobs.noop, every=10)

    ops.disable_schedule("beat", actor="dan")
    ops.enable_schedule("beat", actor="dan")
    ops.remove_schedule("beat", actor="dan")

    actions = list(
        AuditEvent.objects.filter(actor="dan").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["schedule_disable", "schedule_enable", "schedule_remove"]
    with pytest.raises(ScheduleError, match="there is no such schedule"):
        ops.run_schedule_now("beat")


@pytest.mark.django_db
def test_settings_schedules_are_declared_and_dropped_ones_removed(settings) -> None:  # type: ignore[no-untyped-def]
    schedules.upsert_interval("from-code", jobs.noop, every=60)
    settings.QUEUE_ENGINE = {
        **settings.QUEUE_ENGINE,
        "SCHEDULES": {
            "a": {"kind": "tests.noop", "cron": "*/5 * * * *", "timezone": "Asia/Tokyo"},
            "b": {"kind": "tests.noop", "every": 30, "queue": "beats", "priority": 7},
        },
    }

    assert schedules.declare_configured() == ["a", "b"]
    settings.QUEUE_ENGINE = {
        **settings.QUEUE_ENGINE,
        "SCHEDULES": {"b": {"kind": "tests.noop", "every": 30, "queue": "beats", "priority": 7}},
    }
    schedules.declare_configured()

    rows = dict(Schedule.objects.values_list("name", "source"))
    assert rows == {"b": "settings", "from-code": "code"}


def test_a_bad_settings_schedule_fails_the_system_check(settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUEUE_ENGINE = {
        **settings.QUEUE_ENGINE,
        "SCHEDULES": {"broken": {"kind": "tests.noop", "cron": "0 0 * *"}},
    }

    errors = check_schedules()

    assert [e.id for e in errors] == ["queue_engine.E020"]
    assert "['broken']" in errors[0].msg and "has 4 fields" in errors[0].msg


@pytest.mark.parametrize("payload", ["x", [1, 2], [["a", 1]], 3])
def test_a_settings_schedule_with_a_non_dict_payload_fails_the_system_check(  # type: ignore[no-untyped-def]
    settings, payload
) -> None:
    settings.QUEUE_ENGINE = {
        **settings.QUEUE_ENGINE,
        "SCHEDULES": {"bad": {"kind": "tests.noop", "every": 60, "payload": payload}},
    }

    errors = check_schedules()

    assert [e.id for e in errors] == ["queue_engine.E020"]
    assert errors[0].msg.startswith("QUEUE_ENGINE['SCHEDULES']['bad']: Schedule 'bad': ")
    assert "must be a dict of the job's arguments by name (or None for none), not a " in (
        errors[0].msg
    )


@pytest.mark.django_db
def test_upsert_refuses_a_non_dict_payload_and_writes_nothing() -> None:
    with pytest.raises(ScheduleError) as caught:
        schedules.upsert_interval("bad", jobs.noop, every=60, payload=["x"])  # type: ignore[arg-type]

    assert str(caught.value) == (
        "Schedule 'bad': the payload must be a dict of the job's arguments by name "
        "(or None for none), not a list (['x'])."
    )
    assert not Schedule.objects.exists() and not AuditEvent.objects.exists()


# --- firing --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_due_cron_schedule_fires_at_its_local_time(conninfo: str) -> None:
    schedule = schedules.upsert_cron(
        "paris", jobs.noop, cron="0 9 * * *", timezone="Europe/Paris", payload={"at": "{fire_time}"}
    )
    Schedule.objects.filter(pk=schedule.pk).update(
        next_fire_at=F("next_fire_at") - timedelta(days=1)
    )

    fired = run_service(conninfo, fire_due_schedules)
    again = run_service(conninfo, fire_due_schedules)

    assert (fired.enqueued, again.enqueued) == (1, 0)
    [meta] = fires("paris")
    at = datetime.fromisoformat(str(meta["fire_time"])).astimezone(ZoneInfo("Europe/Paris"))
    assert (at.hour, at.minute, meta["missed"]) == (9, 0, 0)
    job = Job.objects.get(meta__schedule="paris")
    assert job.payload == {"at": meta["fire_time"]} and str(job.dedup_key).startswith(
        "schedule:paris:"
    )
    moved = Schedule.objects.get(pk=schedule.pk)
    assert moved.next_fire_at == schedule.next_fire_at and moved.last_job_id == job.id


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("policy", "expected"), [("run_once", [2]), ("skip", [])])
def test_fire_times_missed_while_down_run_once_or_are_skipped(
    conninfo: str, policy: str, expected: list[int]
) -> None:
    schedule = schedules.upsert_interval("hourly-ish", jobs.noop, every=600, missed=policy)  # type: ignore[arg-type]
    Schedule.objects.filter(pk=schedule.pk).update(
        next_fire_at=F("next_fire_at") - timedelta(minutes=35)
    )  # due 25, 15 and 5 minutes ago

    run_service(conninfo, fire_due_schedules)

    assert [m["missed"] for m in fires("hourly-ish")] == expected
    assert Schedule.objects.get(pk=schedule.pk).next_fire_at == (
        schedule.next_fire_at - timedelta(minutes=5)
    )  # on the grid, 5 minutes from now


@pytest.mark.django_db(transaction=True)
def test_a_schedule_whose_kind_vanished_records_the_error(conninfo: str) -> None:
    schedule = schedules.upsert_interval("orphan", jobs.noop, every=60)
    Schedule.objects.filter(pk=schedule.pk).update(
        kind="tests.gone", next_fire_at=F("next_fire_at") - timedelta(minutes=1)
    )

    fired = run_service(conninfo, fire_due_schedules)

    orphan = Schedule.objects.get(pk=schedule.pk)
    assert (fired.enqueued, fired.skipped) == (0, 1)
    assert "Unknown job kind 'tests.gone'" in orphan.last_error
    assert orphan.next_fire_at == schedule.next_fire_at  # past the fire time it could not fire


@pytest.mark.slow
def test_a_schedule_fires_once_per_time_with_three_workers_and_a_leader_kill(workers) -> None:  # type: ignore[no-untyped-def]
    schedules.upsert_interval("tick", jobs.noop, every=1, payload={"at": "{fire_time}"})
    for i in range(3):
        workers.start("--worker-id", f"w{i}", "--queues", "default")
    leader = wait_for(
        lambda: WorkerProcess.objects.filter(is_leader=True).first(), timeout=45, message="a leader"
    )
    wait_for(lambda: len(fires("tick")) >= 3, timeout=30, message="three fires")

    os.kill(leader.pid, signal.SIGKILL)
    killed_at = len(fires("tick"))
    wait_for(
        lambda: len(fires("tick")) >= killed_at + 4, timeout=30, message="fires under a new leader"
    )
    workers.stop_all()

    metas = fires("tick")
    times = [datetime.fromisoformat(str(m["fire_time"])) for m in metas]
    assert len(times) == len(set(times)), "a fire time fired twice"
    print(
        "fire times (missed folded in):",
        [(t.time().isoformat(), m["missed"]) for t, m in zip(times, metas, strict=True)],
    )
    # Each fire time from the first job's to the last's is one job or folded into the
    # next job (missed). The first job's own missed are the times before workers ran.
    grid = round((times[-1] - times[0]).total_seconds()) + 1
    assert len(metas) + sum(int(str(m["missed"])) for m in metas[1:]) == grid, (
        "a fire time was lost"
    )
    assert all((t - times[0]).total_seconds() % 1 == 0 for t in times)


@pytest.mark.slow
def test_workers_declare_the_settings_schedules_when_they_start(workers) -> None:  # type: ignore[no-untyped-def]
    workers.start(env={"DJANGO_SETTINGS_MODULE": "tests.support.settings_schedules"})

    wait_for(lambda: len(fires("from-settings")) >= 2, timeout=45, message="two fires")

    schedule = Schedule.objects.get(name="from-settings")
    assert (schedule.source, schedule.every) == ("settings", timedelta(seconds=1))
    assert "schedules declared from settings: from-settings" in workers.output()


@pytest.mark.django_db(transaction=True)
def test_redeclaring_while_the_leader_fires_keeps_the_next_fire_time(conninfo: str) -> None:
    """A deploy re-declares a schedule (same timing, new payload) while the leader holds
    it to fire: the fire's new next_fire_at must not be written back over."""
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import psycopg
    from django.db import connection

    s = schedules.upsert_interval("race", jobs.noop, every=600, payload={"v": 1})
    Schedule.objects.filter(pk=s.pk).update(next_fire_at=F("next_fire_at") - timedelta(minutes=10))
    due_at = Schedule.objects.get(pk=s.pk).next_fire_at
    locked = threading.Event()

    async def leader() -> int:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        try:
            async with conn.transaction():
                await conn.execute(
                    "SELECT 1 FROM queue_engine_schedule WHERE id = %s FOR UPDATE", [s.pk]
                )
                locked.set()
                await asyncio.sleep(0.5)  # the declaration reads the row meanwhile
                return (await fire_due_schedules(conn)).enqueued
        finally:
            await conn.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        fired = pool.submit(asyncio.run, leader())
        assert locked.wait(5)
        schedules.upsert_interval("race", jobs.noop, every=600, payload={"v": 2})
        assert fired.result() == 1
    connection.close()

    after = Schedule.objects.get(pk=s.pk)
    assert after.next_fire_at > due_at  # was rewound to the time that had just fired
    assert after.payload == {"v": 2}


def test_a_clock_change_at_midnight_does_not_stop_the_next_fire() -> None:
    # St. John's fell back at 00:01 on 2009-11-01: 00:00-00:01 came twice, and cronsim
    # alone looped for ever looking for 00:59 that day.
    recurrence = Recurrence(cron="59 * 1 11 *", timezone="America/St_Johns")

    after = recurrence.first_after(datetime(2009, 10, 30, tzinfo=UTC))
    before = recurrence._cron_at_or_before(
        datetime(2009, 11, 1, 6, tzinfo=UTC), floor=datetime(2009, 10, 1, tzinfo=UTC)
    )

    assert after == datetime(2009, 11, 1, 4, 29, tzinfo=UTC)  # 00:59 NST (-03:30)
    assert before == datetime(2009, 11, 1, 5, 29, tzinfo=UTC)  # 01:59 NST
