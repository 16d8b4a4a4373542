from __future__ import annotations

import datetime as dt
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.db.models import signals
from django.test import override_settings
from django.utils import timezone

from queue_engine.enqueueing import bulk
from queue_engine.enqueueing.bulk import enqueue_many
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.enqueueing.single import enqueue
from queue_engine.exceptions import EnqueueError, UnknownKindError
from queue_engine.flows import Flow
from queue_engine.models import Job, QueueConfig
from queue_engine.worker.roster import Wake
from tests.support import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def live_count(conn: psycopg.Connection, **where: object) -> int:
    clause = " AND ".join(f"{k} = %s" for k in where) or "true"
    row = conn.execute(
        f"SELECT count(*) FROM queue_engine_job WHERE {clause}", list(where.values())
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_enqueue_is_visible_to_others_only_at_commit(other_connection: psycopg.Connection) -> None:
    with transaction.atomic():
        job = jobs.add.enqueue(a=1, b=2)
        seen_inside = live_count(other_connection, id=job.id)

    assert seen_inside == 0
    assert live_count(other_connection, id=job.id) == 1


def test_rolled_back_enqueue_never_exists(other_connection: psycopg.Connection) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        job = jobs.add.enqueue(a=1, b=2)
        raise RuntimeError("the view failed")

    assert live_count(other_connection, id=job.id) == 0


def test_enqueue_applies_definition_defaults() -> None:
    job = jobs.add.enqueue(3, 4)

    row = Job.objects.get(pk=job.pk)
    assert (row.kind, row.queue, row.priority, row.max_attempts) == ("tests.add", "math", 5, 3)
    assert (row.name, row.group_key, row.payload) == ("3 + 4", "acct-3", {"a": 3, "b": 4})
    assert row.state == "available"


def test_per_call_overrides() -> None:
    run_at = timezone.now() + dt.timedelta(hours=1)

    job = jobs.add.using(
        queue="urgent", priority=-7, run_at=run_at, max_attempts=9, name="custom"
    ).enqueue(a=1, b=1)

    row = Job.objects.get(pk=job.pk)
    assert (row.queue, row.priority, row.max_attempts, row.name) == ("urgent", -7, 9, "custom")
    assert (row.state, row.run_at) == ("scheduled", run_at)
    assert QueueConfig.objects.filter(name="urgent").exists()


def test_delay_uses_the_database_clock() -> None:
    job = jobs.noop.using(delay=dt.timedelta(seconds=90)).enqueue()

    with connection.cursor() as cursor:
        cursor.execute("SELECT run_at - created_at FROM queue_engine_job WHERE id = %s", [job.id])
        gap = cursor.fetchone()[0]
    assert job.state == "scheduled"
    assert dt.timedelta(seconds=89) < gap < dt.timedelta(seconds=91)


def test_dedup_returns_the_live_job() -> None:
    first = jobs.add.using(dedup_key="sum-1").enqueue(a=1, b=1)

    second = jobs.add.using(dedup_key="sum-1").enqueue(a=5, b=5)

    assert second.id == first.id
    assert second.deduplicated and not first.deduplicated  # type: ignore[attr-defined]
    assert Job.objects.get(pk=first.id).payload == {"a": 1, "b": 1}


def test_dedup_key_is_free_again_once_the_job_left_the_live_table() -> None:
    first = jobs.add.using(dedup_key="sum-2").enqueue(a=1, b=1)
    Job.objects.filter(pk=first.id).delete()

    second = jobs.add.using(dedup_key="sum-2").enqueue(a=1, b=1)

    assert second.id != first.id


def run_concurrently(count: int, action: Callable[[int], int]) -> list[int]:
    barrier = threading.Barrier(count)

    def call(i: int) -> int:
        try:
            barrier.wait()
            return action(i)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(call, range(count)))


def test_concurrent_dedup_enqueues_make_one_job() -> None:
    ids = run_concurrently(8, lambda i: jobs.add.using(dedup_key="race").enqueue(a=i, b=0).id)

    assert len(set(ids)) == 1
    assert Job.objects.filter(kind="tests.add", dedup_key="race").count() == 1


def test_debounce_coalesces_a_burst_into_one_job_with_the_latest_payload() -> None:
    for i in range(5):
        job = jobs.add.using(dedup_key="deb", delay=30).enqueue_debounced(a=i, b=0)

    rows = list(Job.objects.filter(dedup_key="deb"))
    assert len(rows) == 1
    assert rows[0].id == job.id
    assert rows[0].payload == {"a": 4, "b": 0}
    assert rows[0].state == "scheduled"
    assert rows[0].meta["debounced"] == 4


def test_debounce_moves_the_run_time_to_the_latest_call() -> None:
    first = jobs.add.using(dedup_key="deb-t", delay=5).enqueue_debounced(a=1, b=1)

    last = jobs.add.using(dedup_key="deb-t", delay=120).enqueue_debounced(a=2, b=2)

    assert last.id == first.id
    assert last.run_at > first.run_at + dt.timedelta(seconds=100)


def test_concurrent_debounce_keeps_one_pending_job() -> None:
    ids = run_concurrently(
        8, lambda i: jobs.add.using(dedup_key="deb-race", delay=60).enqueue_debounced(a=i, b=0).id
    )

    assert len(set(ids)) == 1
    assert Job.objects.filter(dedup_key="deb-race").count() == 1


def test_debounce_behind_a_running_job_queues_a_fresh_one() -> None:
    running = jobs.add.using(dedup_key="deb-run").enqueue(a=1, b=1)
    Job.objects.filter(pk=running.id).update(state="running")

    fresh = jobs.add.using(dedup_key="deb-run").enqueue_debounced(a=2, b=2)

    assert fresh.id != running.id
    held = Job.objects.get(pk=running.id)
    assert held.dedup_key is None and held.meta["released_dedup_key"] == "deb-run"


@pytest.mark.parametrize(
    "options",
    [
        {},  # every other column takes its default: the four-column INSERT
        {"labels": ["gpu"], "meta": {"by": "test"}},
        {"priority": 3, "name": "named"},
        {"delay": 60},
    ],
)
def test_the_returned_job_is_the_stored_row(options: dict[str, Any]) -> None:
    returned = jobs.add.using(**options).enqueue(a=1, b=2)

    stored = Job.objects.get(pk=returned.pk)
    for field in Job._meta.concrete_fields:
        assert getattr(returned, field.attname) == getattr(stored, field.attname), field.name
    assert returned._state.adding is False and returned._state.db == "default"


def test_post_init_receivers_see_the_returned_job() -> None:
    """The returned Job skips Model.__init__ unless someone listens to its signals."""
    seen: list[int | None] = []

    def receiver(sender: type[Job], instance: Job, **kwargs: object) -> None:
        seen.append(instance.pk)

    signals.post_init.connect(receiver, sender=Job)
    try:
        returned = jobs.add.enqueue(a=1, b=2)
    finally:
        signals.post_init.disconnect(receiver, sender=Job)

    assert seen == [returned.pk]
    assert returned == Job.objects.get(pk=returned.pk) and returned.payload == {"a": 1, "b": 2}


def prepared_inserts() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements "
            "WHERE statement LIKE 'INSERT INTO queue_engine_job%%'"
        )
        return [row[0] for row in cursor.fetchall()]


def test_enqueue_statements_are_prepared_unless_turned_off() -> None:
    for i in range(3):
        jobs.add.enqueue(a=i, b=0)
    assert len(prepared_inserts()) == 1  # planned once, not once a job

    with override_settings(QUEUE_ENGINE={"PREPARED_STATEMENTS": False}):
        jobs.add.using(dedup_key="unprepared").enqueue(a=0, b=0)
    assert len(prepared_inserts()) == 1


def test_debounce_without_a_key_is_refused() -> None:
    with pytest.raises(EnqueueError, match="dedup key"):
        jobs.add.enqueue_debounced(a=1, b=1)


def test_bulk_enqueue_returns_ids_in_input_order() -> None:
    ids = jobs.add.enqueue_many([{"a": i, "b": 0} for i in range(10_000)])

    assert len(ids) == 10_000
    stored = dict(Job.objects.filter(pk__in=ids).values_list("id", "payload"))
    assert [stored[i]["a"] for i in ids] == list(range(10_000))
    assert Job.objects.filter(pk__in=ids, queue="math", name="0 + 0").count() == 1


@pytest.mark.parametrize("chunk", [5_000, 2], ids=["one-statement", "across-chunks"])
def test_bulk_enqueue_with_dedup_keys_maps_duplicates_to_the_holder(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "INSERT_CHUNK", chunk)
    held = jobs.add.using(dedup_key="b-1").enqueue(a=0, b=0)
    specs = [
        JobSpec(kind="tests.add", payload={"a": i, "b": 0}, dedup_key=f"b-{i % 3}")
        for i in range(6)
    ]

    ids = enqueue_many(specs)

    assert ids[1] == ids[4] == held.id
    assert ids[0] == ids[3] and ids[2] == ids[5]
    assert len(set(ids)) == 3
    assert Job.objects.count() == 3
    payloads = dict(Job.objects.values_list("id", "payload"))
    assert (payloads[ids[0]], payloads[ids[2]]) == ({"a": 0, "b": 0}, {"a": 2, "b": 0})


def test_bulk_enqueue_mixes_kinds_queues_and_schedules() -> None:
    later = timezone.now() + dt.timedelta(minutes=5)
    specs = [
        JobSpec(kind="tests.noop", queue="a"),
        JobSpec(kind="tests.add", payload={"a": 1, "b": 2}, run_at=later),
        JobSpec(kind="tests.noop", queue="b", delay=30),
    ]

    ids = enqueue_many(specs)

    states = dict(Job.objects.filter(pk__in=ids).values_list("id", "state"))
    assert [states[i] for i in ids] == ["available", "scheduled", "scheduled"]


def test_bulk_enqueue_keeps_every_character_and_option() -> None:
    awkward = "tab\there, line\nbreak, cr\r, back\\slash, \\N, quote \" and 'é' {x}"
    later = timezone.now() + dt.timedelta(minutes=5)
    specs = [
        JobSpec(
            kind="tests.noop",
            payload={"text": awkward, "nested": [awkward, {"k": None}]},
            name=awkward,
            group_key=awkward,
            labels=[awkward, "plain", 'x"y', "a,b", "{c}"],
            meta={"note": awkward},
            queue="odd\\queue",
            priority=-7,
            max_attempts=9,
            run_at=later,
        ),
        JobSpec(kind="tests.noop", payload={"i": 1}, delay=60),
        JobSpec(kind="tests.add", payload={"a": 1, "b": 2}),
    ]

    first, delayed, plain = (Job.objects.get(pk=i) for i in enqueue_many(specs))

    assert first.payload == {"text": awkward, "nested": [awkward, {"k": None}]}
    assert (first.name, first.group_key, first.meta) == (awkward, awkward, {"note": awkward})
    assert first.labels == [awkward, "plain", 'x"y', "a,b", "{c}"]
    assert (first.queue, first.priority, first.max_attempts) == ("odd\\queue", -7, 9)
    assert (first.state, first.run_at) == ("scheduled", later)
    assert first.dedup_key is None and first.errors == [] and first.attempt == 0
    assert delayed.state == "scheduled" and delayed.run_at > timezone.now()
    assert (plain.state, plain.queue, plain.name, plain.labels) == (
        "available",
        "math",
        "1 + 2",
        [],
    )
    assert plain.run_at <= timezone.now()


@pytest.mark.parametrize("bad_at", [0, 100, 2_999], ids=["first", "early", "after-chunks"])
def test_bulk_enqueue_is_all_or_nothing(other_connection: psycopg.Connection, bad_at: int) -> None:
    # Rows are sent in chunks as they are built: a bad one after several chunks have
    # gone to the server must still leave nothing behind.
    specs = [JobSpec(kind="tests.noop", payload={"i": i}) for i in range(3_000)]
    specs[bad_at] = JobSpec(kind="tests.noop", payload={"bad": {1, 2}})

    with pytest.raises(EnqueueError, match=r"set at 'bad'"):
        enqueue_many(specs)

    assert live_count(other_connection) == 0


def test_a_bad_bulk_item_is_named_by_its_index_and_nothing_is_written(
    other_connection: psycopg.Connection,
) -> None:
    calls: list[dict[str, Any]] = [{"a": i, "b": 0} for i in range(2_000)]
    specs = [JobSpec(kind="tests.noop", payload={"i": i}) for i in range(2_000)]

    calls[1737] = {"a": dt.date(2026, 1, 1), "b": 0}
    with pytest.raises(
        EnqueueError, match=r"^item 1737: tests\.add: the payload has a date at 'a'"
    ):
        jobs.add.enqueue_many(calls)
    calls[1737] = {"a": 1}
    with pytest.raises(TypeError, match=r"^item 1737: tests\.add: missing a required argument"):
        jobs.add.enqueue_many(calls)
    specs[1737] = JobSpec(kind="tests.noop", priority=500)
    with pytest.raises(EnqueueError, match=r"^item 1737: tests\.noop: priority must be"):
        enqueue_many(specs)
    specs[1737] = JobSpec(kind="tests.noop", labels="gpu")
    with pytest.raises(EnqueueError, match=r"^item 1737: tests\.noop: labels must be a list"):
        enqueue_many(specs)
    specs[1737] = JobSpec(kind="tests.noop", payload={"x": {1}}, dedup_key="k")  # not COPY
    with pytest.raises(EnqueueError, match=r"^item 1737: tests\.noop: the payload has a set"):
        enqueue_many(specs)

    assert live_count(other_connection) == 0


def test_a_bulk_enqueue_failing_part_way_leaves_the_callers_transaction_usable(
    other_connection: psycopg.Connection,
) -> None:
    calls: list[dict[str, Any]] = [{"a": i, "b": 0} for i in range(2_500)]
    calls.append({"a": math.nan, "b": 0})

    with transaction.atomic():
        before = jobs.noop.enqueue(step="before")
        with pytest.raises(EnqueueError, match="NaN"):
            jobs.add.enqueue_many(calls)
        after = jobs.noop.enqueue(step="after")

    assert live_count(other_connection) == 2
    assert live_count(other_connection, id=before.id) == 1
    assert live_count(other_connection, id=after.id) == 1


def test_orm_create_is_a_valid_enqueue_with_kind_defaults() -> None:
    job = Job.objects.create(kind="tests.add", payload={"a": 2, "b": 3})

    job.refresh_from_db()
    assert (job.queue, job.priority, job.state, job.name) == ("math", 5, "available", "2 + 3")
    assert job.run_at is not None and job.max_attempts == 3


def test_orm_bulk_create_is_a_valid_enqueue() -> None:
    Job.objects.bulk_create(
        [Job(kind="tests.noop", payload={"i": i}) for i in range(3)]
        + [Job(kind="unregistered.kind", queue="raw")]
    )

    assert Job.objects.filter(queue="default", state="available").count() == 3
    assert Job.objects.filter(queue="raw").count() == 1
    assert set(QueueConfig.objects.values_list("name", flat=True)) >= {"default", "raw"}


def test_orm_enqueues_take_the_kinds_labels_unless_given() -> None:
    created = Job.objects.create(kind="tests.needs_gpu", payload={})
    bulk, own = Job.objects.bulk_create(
        [Job(kind="tests.needs_gpu", payload={}), Job(kind="tests.needs_gpu", labels=["tpu"])]
    )

    # Only a worker with the label may claim them, as after .enqueue().
    stored = dict(Job.objects.values_list("pk", "labels"))
    assert (stored[created.pk], stored[bulk.pk], stored[own.pk]) == (["gpu"], ["gpu"], ["tpu"])


def test_the_job_a_plain_enqueue_returns_matches_the_stored_row() -> None:
    returned = jobs.noop.enqueue()

    assert returned.name == Job.objects.get(pk=returned.pk).name == ""
    returned.save()  # it was None: the NOT NULL column refused the save


@pytest.mark.parametrize("how", ["single", "bulk", "debounced", "flow"])
def test_a_delay_counts_from_the_call_not_from_the_start_of_the_transaction(how: str) -> None:
    add = jobs.add.using(delay=1, dedup_key=f"delay-{how}" if how == "debounced" else None)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # the transaction has begun
        # The clock moves on inside the transaction: the gap the delay must not count.
        time.sleep(1.5)
        called = timezone.now()
        if how == "single":
            pk = add.enqueue(a=1, b=2).pk
        elif how == "bulk":
            pk = add.enqueue_many([{"a": 1, "b": 2}])[0]
        elif how == "debounced":
            pk = add.enqueue_debounced(a=1, b=2).pk
        else:
            flow = Flow("delayed")
            flow.add("only", add, a=1, b=2)
            pk = Job.objects.get(flow_id=flow.submit()).pk

    job = Job.objects.get(pk=pk)
    assert job.state == "scheduled"
    assert 0.5 < (job.run_at - called).total_seconds() < 1.5, job.run_at - called


def test_orm_create_with_a_future_run_at_is_scheduled_and_wakes_nobody(conninfo: str) -> None:
    later = timezone.now() + dt.timedelta(hours=1)
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute("LISTEN qe_wake")
        created = Job.objects.create(kind="tests.add", payload={"a": 1, "b": 2}, run_at=later)
        bulk = Job.objects.bulk_create(
            [
                Job(kind="tests.noop", queue="later", run_at=later),
                Job(kind="unregistered.kind", queue="later", run_at=later),
            ]
        )
        wake_ups = [n.payload for n in listener.notifies(timeout=0.3) if n.channel == "qe_wake"]
        now = Job.objects.create(kind="tests.noop", queue="now")
        chosen = Job.objects.create(kind="tests.noop", queue="now", run_at=later, state="available")
        wake_ups_after = [Wake.parse(n.payload).queue for n in listener.notifies(timeout=0.3)]

    states = dict(Job.objects.values_list("id", "state"))
    assert [states[j.pk] for j in [created, *bulk]] == ["scheduled"] * 3
    assert wake_ups == []
    assert (states[now.pk], states[chosen.pk]) == ("available", "available")
    assert wake_ups_after == ["now", "now"]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"when": dt.datetime(2026, 1, 1)}, r"datetime at 'when'.*isoformat"),
        ({"amount": Decimal("1.10")}, r"Decimal at 'amount'.*str\(value\)"),
        ({"tags": {"a", "b"}}, r"set at 'tags'.*sorted"),
        ({"ratio": math.nan}, r"nan at 'ratio'.*NaN"),
        ({"deep": [{"x": object()}]}, r"object at 'deep\[0\].x'"),
        ({"counts": {1: "one"}}, r"int key 1.*strings"),
    ],
)
def test_unserialisable_payloads_are_refused_and_write_nothing(
    payload: dict[str, object], message: str, other_connection: psycopg.Connection
) -> None:
    with pytest.raises(EnqueueError, match=message):
        enqueue(JobSpec(kind="tests.noop", payload=payload))

    assert live_count(other_connection) == 0


NUL = "a\x00b"
SURROGATE = "caf\udce9"  # what bytes.decode(errors="surrogateescape") makes of Latin-1


@pytest.mark.parametrize(
    ("enqueue_bad", "message"),
    [
        (
            lambda: jobs.noop.enqueue(note=NUL),
            r"the payload has a NUL character \(\\x00\) at 'note'",
        ),
        (
            lambda: jobs.noop.enqueue(deep=[{"x": SURROGATE}]),
            r"the payload has a lone surrogate character at 'deep\[0\]\.x'.*errors='replace'",
        ),
        (lambda: jobs.noop.enqueue(**{NUL: 1}), r"NUL character \(\\x00\) in the key 'a\\x00b'"),
        (lambda: jobs.noop.using(name=NUL).enqueue(), r"the display name 'a\\x00b' has a NUL"),
        (lambda: jobs.noop.using(dedup_key=SURROGATE).enqueue(), r"the dedup_key .* surrogate"),
        (lambda: jobs.noop.using(group_key=NUL).enqueue(), r"the group_key 'a\\x00b' has a NUL"),
        (lambda: jobs.noop.using(meta={"note": NUL}).enqueue(), r"meta has a NUL .* at 'note'"),
        (lambda: jobs.noop.using(labels=[NUL]).enqueue(), r"the label 'a\\x00b' has a NUL"),
        (lambda: jobs.noop.enqueue_many([{"i": 0}, {"note": NUL}]), r"item 1: .* NUL"),
    ],
    ids=["payload", "surrogate", "key", "name", "dedup", "group", "meta", "label", "bulk"],
)
def test_text_postgres_cannot_store_is_refused_and_the_transaction_stays_usable(
    enqueue_bad: Callable[[], object], message: str, other_connection: psycopg.Connection
) -> None:
    with transaction.atomic():
        before = jobs.noop.enqueue(step="before")
        with pytest.raises(EnqueueError, match=message):
            enqueue_bad()
        after = jobs.noop.enqueue(step="after")

    assert live_count(other_connection) == 2
    assert live_count(other_connection, id=before.id) == 1
    assert live_count(other_connection, id=after.id) == 1


def test_text_that_only_looks_like_a_nul_is_kept() -> None:
    text = "\\u0000 is how JSON writes NUL, in café"

    job = jobs.noop.using(name=text).enqueue(text=text)

    stored = Job.objects.get(pk=job.id)
    assert (stored.payload, stored.name) == ({"text": text}, text)


def test_tuples_are_accepted_as_lists() -> None:
    job = enqueue(JobSpec(kind="tests.noop", payload={"pair": (1, 2)}))

    assert Job.objects.get(pk=job.id).payload == {"pair": [1, 2]}


@override_settings(QUEUE_ENGINE={"MAX_PAYLOAD_BYTES": 1000})
def test_oversized_payload_is_refused() -> None:
    with pytest.raises(EnqueueError, match=r"1,0\d\d bytes of JSON, over the limit of 1,000"):
        jobs.noop.enqueue(blob="x" * 1000)


def test_plain_enqueue_follows_changed_settings() -> None:
    """A definition without overrides checks its options once, until the settings change."""
    first = jobs.noop.enqueue(blob="x" * 200)

    small = override_settings(QUEUE_ENGINE={"MAX_PAYLOAD_BYTES": 100})
    with small, pytest.raises(EnqueueError, match=r"is 2\d\d bytes of JSON, over the limit of 100"):
        jobs.noop.enqueue(blob="x" * 200)
    locked = override_settings(
        QUEUE_ENGINE={"QUEUES": {"other": {}}, "ALLOW_UNDECLARED_QUEUES": False}
    )
    with locked, pytest.raises(EnqueueError, match=r"queue 'default' is not declared"):
        jobs.noop.enqueue()
    again = jobs.noop.enqueue(blob="x" * 200)

    assert list(Job.objects.filter(kind=jobs.noop.kind).values_list("id", flat=True)) == [
        first.id,
        again.id,
    ]


def test_unknown_kind_is_refused_with_a_hint() -> None:
    with pytest.raises(UnknownKindError, match=r"'billing.nope'.*JOB_MODULES"):
        enqueue(JobSpec(kind="billing.nope"))


@override_settings(QUEUE_ENGINE={"ALLOW_UNKNOWN_KINDS": True})
def test_unknown_kind_is_accepted_when_allowed() -> None:
    job = enqueue(JobSpec(kind="other_service.reindex", payload={"id": 1}))

    assert Job.objects.get(pk=job.id).queue == "default"


@pytest.mark.parametrize("priority", [101, -101, 1.5])
def test_priority_out_of_range_is_refused(priority: object) -> None:
    with pytest.raises(EnqueueError, match="priority must be a whole number from -100 to 100"):
        jobs.noop.using(priority=priority).enqueue()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, r"max_attempts must be a whole number of at least 1 .*, not 0\."),
        ({"max_attempts": -2}, r"max_attempts must be a whole number of at least 1 .*, not -2\."),
        ({"max_attempts": True}, r"max_attempts must be a whole number .* not True"),
        ({"max_attempts": "3"}, r"max_attempts must be a whole number .* not '3'"),
        ({"max_attempts": 2**31}, r"max_attempts must be at most 2147483647"),
        (
            {"labels": "gpu"},
            r"labels must be a list of strings, not the string 'gpu'; pass \['gpu'\]",
        ),
        ({"labels": ["x" * 65]}, r"each label must be a string of 1 to 64 characters"),
        ({"priority": True}, r"priority must be a whole number from -100 to 100 .* not True"),
        ({"priority": "5"}, r"priority must be a whole number from -100 to 100 .* not '5'"),
        ({"delay": "5"}, r"delay must be a number of seconds or a timedelta, not '5'"),
    ],
)
def test_bad_per_call_options_are_refused_before_anything_is_written(
    options: dict[str, Any], message: str, other_connection: psycopg.Connection
) -> None:
    with pytest.raises(EnqueueError, match=message):
        jobs.noop.using(**options).enqueue()
    with pytest.raises(EnqueueError, match=message):
        enqueue(JobSpec(kind="tests.noop", **options))

    assert live_count(other_connection) == 0


def test_max_attempts_of_one_means_one_attempt() -> None:
    job = jobs.add.using(max_attempts=1).enqueue(a=1, b=1)

    assert Job.objects.get(pk=job.id).max_attempts == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": 1e12}, r"a delay of 1e\+12 seconds runs the job after 9999-12-31 00:00 UTC"),
        ({"delay": math.inf}, r"delay must be a finite number of seconds, not inf"),
        ({"delay": -math.inf}, r"delay must be a finite number of seconds, not -inf"),
        ({"delay": math.nan}, r"delay must be a finite number of seconds, not nan"),
        ({"delay": -1}, r"delay must not be negative"),
        ({"run_at": "2030-01-01T00:00:00Z"}, r"run_at must be an aware datetime, not a str"),
        ({"run_at": dt.date(2030, 1, 1)}, r"run_at must be an aware datetime, not a date"),
        (
            {"run_at": dt.datetime(9999, 12, 31, 12, tzinfo=dt.UTC)},
            r"run_at 9999-12-31T12:00:00\+00:00 is after 9999-12-31 00:00 UTC",
        ),
    ],
)
def test_a_run_time_that_cannot_be_stored_is_refused_before_anything_is_written(
    options: dict[str, Any], message: str, other_connection: psycopg.Connection
) -> None:
    with pytest.raises(EnqueueError, match=message):
        jobs.noop.using(**options).enqueue()
    with pytest.raises(EnqueueError, match=message):
        enqueue(JobSpec(kind="tests.noop", **options))
    with pytest.raises(EnqueueError, match=rf"^item 1: tests\.noop: {message}"):
        enqueue_many([JobSpec(kind="tests.noop"), JobSpec(kind="tests.noop", **options)])
    with pytest.raises(EnqueueError, match=message):
        Flow("late").add("late", jobs.noop.using(**options))

    assert live_count(other_connection) == 0


def test_the_latest_storable_run_time_is_read_back_intact() -> None:
    latest = dt.datetime(9999, 12, 30, 23, 59, tzinfo=dt.UTC)

    job = jobs.noop.using(run_at=latest).enqueue()

    assert Job.objects.get(pk=job.id).run_at == latest


def test_naive_run_at_is_refused() -> None:
    with pytest.raises(EnqueueError, match="no time zone"):
        jobs.noop.using(run_at=dt.datetime(2030, 1, 1)).enqueue()


@override_settings(
    QUEUE_ENGINE={"QUEUES": {"default": {}, "emails": {}}, "ALLOW_UNDECLARED_QUEUES": False}
)
def test_undeclared_queue_is_refused_when_queues_are_locked_down() -> None:
    jobs.noop.using(queue="emails").enqueue()

    with pytest.raises(EnqueueError, match=r"queue 'emial' is not declared.*default, emails"):
        jobs.noop.using(queue="emial").enqueue()


def test_unknown_using_option_is_refused() -> None:
    with pytest.raises(TypeError, match="unknown option"):
        jobs.noop.using(queue_name="x")


def test_the_package_level_enqueue_is_callable_after_the_write_side_is_imported() -> None:
    import queue_engine.enqueueing.single  # noqa: F401  (a submodule import must not hide it)
    from queue_engine import enqueue as package_enqueue

    job = package_enqueue(JobSpec(kind="tests.noop", payload={}))

    assert Job.objects.filter(pk=job.pk, kind="tests.noop").exists()


def test_bulk_dedup_inserts_again_when_the_holder_ends_before_it_is_looked_up() -> None:
    holder = jobs.add.using(dedup_key="k").enqueue(a=0, b=0).pk
    # The holder ends right after the bulk insert skipped its key (a statement trigger
    # fires even when ON CONFLICT inserted nothing), before the lookup of holders.
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_end_holder() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN DELETE FROM queue_engine_job WHERE id = {holder}; RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER test_end_holder AFTER INSERT ON queue_engine_job "
            "FOR EACH STATEMENT EXECUTE FUNCTION test_end_holder()"
        )
    try:
        specs = [JobSpec(kind="tests.add", payload={"a": i, "b": 0}, dedup_key="k") for i in (1, 2)]
        ids = enqueue_many(specs)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER test_end_holder ON queue_engine_job")
            cursor.execute("DROP FUNCTION test_end_holder()")

    assert ids[0] == ids[1] != holder
    assert list(Job.objects.values_list("pk", "payload")) == [(ids[0], {"a": 1, "b": 0})]
