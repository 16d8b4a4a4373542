"""Queue settings, pause and resume through ops_queues and the Django admin."""

from __future__ import annotations

import json
import time

import psycopg
import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client

from queue_engine import schedules
from queue_engine.exceptions import OpsError
from queue_engine.models import (
    AuditEvent,
    ClaimLog,
    GroupLimit,
    Job,
    JobRecord,
    QueueConfig,
    Schedule,
)
from queue_engine.ops import queues as ops_queues
from tests.support import jobs
from tests.support.workers import Workers, wait_for


@pytest.mark.django_db
def test_update_queue_config_changes_only_what_differs_and_audits_it() -> None:
    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=5, retain_failed=3600)

    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=5)

    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.retain_failed, config.paused) == (5, 3600, False)
    [event] = AuditEvent.objects.all()
    assert (event.actor, event.action, event.target) == ("alice", "queue_config", "emails")
    assert event.details["changes"] == {
        "max_concurrency": [None, 5],
        "retain_failed": [604800, 3600],
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_concurency": 3}, "unknown setting(s) max_concurency"),
        ({"max_concurrency": 0}, "max_concurrency must be a whole number from 1"),
        ({"lock_duration": None}, "lock_duration must be a whole number from 1"),
        ({"retain_succeeded": -1}, "retain_succeeded must be a whole number from 0"),
        ({"rate_limit": "10"}, "rate_limit must be a whole number"),
        ({"paused": "yes"}, "paused must be True or False"),
    ],
)
def test_bad_queue_settings_are_refused_and_nothing_is_written(fields, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpsError) as caught:
        ops_queues.update_queue_config("emails", **fields)

    assert message in str(caught.value)
    assert not QueueConfig.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_pause_and_resume_are_audited_and_resume_wakes_workers(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute("LISTEN qe_control")

        ops_queues.pause_queue("emails", actor="bob")
        ops_queues.pause_queue("emails", actor="bob")  # already paused: nothing to do
        ops_queues.resume_queue("emails", actor="bob")

        notes = [json.loads(n.payload) for n in listener.notifies(timeout=0.5)]
    assert notes == [
        {"action": "pause", "queue": "emails"},
        {"action": "resume", "queue": "emails"},
    ]
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "pause",
        "resume",
    ]
    assert QueueConfig.objects.get(name="emails").paused is False


@pytest.mark.slow
def test_pause_stops_claims_within_a_second_and_resume_restarts_them(workers: Workers) -> None:
    noop = jobs.noop.using(queue="pausable")
    warm = noop.enqueue()
    workers.start("--queues", "pausable")
    wait_for(lambda: JobRecord.objects.filter(pk=warm.id).exists(), timeout=45)

    ops_queues.pause_queue("pausable", actor="ops")
    paused_at = time.monotonic()
    waiting = []
    while time.monotonic() - paused_at < 2.5:
        waiting.append((time.monotonic() - paused_at, noop.enqueue().id))
        # Paces the enqueues over the paused window the test watches.
        time.sleep(0.1)
    claimed = set(JobRecord.objects.values_list("id", flat=True)) | set(
        Job.objects.exclude(state="available").values_list("id", flat=True)
    )
    resumed_at = time.monotonic()
    ops_queues.resume_queue("pausable", actor="ops")
    wait_for(
        lambda: JobRecord.objects.filter(pk__in=[i for _, i in waiting]).count() == len(waiting),
        timeout=5,
        message="the paused jobs to run once resumed",
    )
    drained_in = time.monotonic() - resumed_at

    late = [job_id for at, job_id in waiting if at >= 1.0]
    assert late and not claimed & set(late), "a job was claimed more than 1 s after the pause"
    print(f"{len(waiting)} jobs waited while paused; all ran {drained_in:.2f} s after resume")
    assert drained_in < 1.0


# --- Django admin ------------------------------------------------------------------------


# The admin's change form of a queue: paused, a cap of 5 and a 30 s lease.
QUEUE_FORM = {
    "paused": "on",
    "max_concurrency": "5",
    "rate_limit": "",
    "rate_window": "60",
    "lock_duration": "30",
    "group_concurrency": "",
    "retain_succeeded": "86400",
    "retain_failed": "604800",
    "retain_cancelled": "86400",
}


@pytest.fixture
def viewer(db: None) -> Client:
    """A staff user who may look at everything in the admin but operate nothing."""
    user = User.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__startswith="view_", content_type__app_label="queue_engine"
        )
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_admin_edits_queue_settings_through_ops(admin_client: Client) -> None:
    QueueConfig.objects.create(name="emails")

    response = admin_client.post("/admin/queue_engine/queueconfig/emails/change/", QUEUE_FORM)

    assert response.status_code == 302
    config = QueueConfig.objects.get(name="emails")
    assert (config.paused, config.max_concurrency, config.lock_duration) == (True, 5, 30)
    event = AuditEvent.objects.get(action="queue_config")
    assert event.actor == "admin" and set(event.details["changes"]) == {
        "paused",
        "max_concurrency",
        "lock_duration",
    }


@pytest.fixture
def editor(db: None) -> Client:
    """A staff user who may change queue settings and schedules, but not operate."""
    user = User.objects.create_user("editor", password="x", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "view_queueconfig",
                "change_queueconfig",
                "view_schedule",
                "change_schedule",
            ]
        )
    )
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_form_pauses_and_disables_only_for_operators(editor: Client) -> None:
    QueueConfig.objects.create(name="emails")
    schedule = schedules.upsert_cron("nightly", jobs.noop, cron="0 3 * * *")
    schedule_form = {
        "kind": "tests.noop",
        "cron": "0 4 * * *",
        "timezone": "UTC",
        "every": "",
        "payload": "{}",
        "queue": "",
        "priority": "",
        "missed_fire_policy": "run_once",
    }  # "enabled" left out: unticked, it would disable the schedule

    queued = editor.post("/admin/queue_engine/queueconfig/emails/change/", QUEUE_FORM)
    scheduled = editor.post(f"/admin/queue_engine/schedule/{schedule.pk}/change/", schedule_form)

    assert queued.status_code == scheduled.status_code == 302
    config = QueueConfig.objects.get(name="emails")
    assert (config.paused, config.max_concurrency) == (False, 5)  # the limit, not the pause
    changed = Schedule.objects.get(pk=schedule.pk)
    assert (changed.cron, changed.enabled) == ("0 4 * * *", True)


@pytest.mark.django_db
def test_admin_refuses_a_bad_queue_setting_with_the_ops_message(admin_client: Client) -> None:
    QueueConfig.objects.create(name="emails")

    response = admin_client.post(
        "/admin/queue_engine/queueconfig/emails/change/",
        {
            "max_concurrency": "0",
            "rate_window": "60",
            "lock_duration": "60",
            "retain_succeeded": "86400",
            "retain_failed": "604800",
            "retain_cancelled": "86400",
        },
    )

    assert response.status_code == 200
    assert "max_concurrency must be a whole number from 1" in response.content.decode()
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_admin_declares_schedules_through_schedules(admin_client: Client) -> None:
    fields = {
        "name": "nightly",
        "kind": "tests.noop",
        "cron": "0 3 * * *",
        "timezone": "Europe/Paris",
        "every": "",
        "payload": "{}",
        "queue": "",
        "priority": "",
        "enabled": "on",
        "missed_fire_policy": "run_once",
    }

    bad = admin_client.post("/admin/queue_engine/schedule/add/", {**fields, "cron": "0 25 * * *"})
    good = admin_client.post("/admin/queue_engine/schedule/add/", fields)

    assert bad.status_code == 200 and "the hour field &#x27;25&#x27;" in bad.content.decode()
    assert good.status_code == 302
    schedule = Schedule.objects.get()
    assert (schedule.source, schedule.cron, schedule.timezone) == (
        "admin",
        "0 3 * * *",
        "Europe/Paris",
    )
    assert AuditEvent.objects.get().action == "schedule_create"


@pytest.mark.django_db
def test_admin_actions_go_through_ops_and_are_audited(admin_client: Client) -> None:
    doomed, waiting = jobs.noop.enqueue(), jobs.noop.using(delay=3600).enqueue()
    schedules.upsert_interval("beat", jobs.noop, every=60)

    cancel = admin_client.post(
        "/admin/queue_engine/job/", {"action": "cancel", "_selected_action": [doomed.id]}
    )
    retry = admin_client.post(
        "/admin/queue_engine/job/", {"action": "retry", "_selected_action": [waiting.id]}
    )
    pause = admin_client.post(
        "/admin/queue_engine/queueconfig/", {"action": "pause", "_selected_action": ["default"]}
    )
    disable = admin_client.post(
        "/admin/queue_engine/schedule/",
        {"action": "disable", "_selected_action": [Schedule.objects.get().pk]},
    )

    assert all(r.status_code == 302 for r in (cancel, retry, pause, disable))
    assert JobRecord.objects.get(pk=doomed.id).state == "cancelled"
    assert Job.objects.get(pk=waiting.id).state == "available"
    assert QueueConfig.objects.get(name="default").paused is True
    assert Schedule.objects.get().enabled is False
    assert list(
        AuditEvent.objects.filter(actor="admin").order_by("id").values_list("action", flat=True)
    ) == ["cancel", "retry", "pause", "schedule_disable"]


@pytest.mark.django_db
def test_admin_redrive_action_puts_dead_jobs_back(admin_client: Client) -> None:
    job = jobs.noop.enqueue()
    admin_client.post(
        "/admin/queue_engine/job/", {"action": "cancel", "_selected_action": [job.id]}
    )

    redrive = admin_client.post(
        "/admin/queue_engine/jobrecord/", {"action": "redrive", "_selected_action": [job.id]}
    )

    assert redrive.status_code == 302
    assert Job.objects.get(pk=job.id).state == "available"
    assert AuditEvent.objects.filter(action="redrive", actor="admin").exists()


@pytest.mark.django_db
def test_admin_hand_back_keeps_a_paused_queue_paused() -> None:
    ops_queues.pause_queue("emails", actor="alice")
    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=8)
    editor = User.objects.create_user("editor", password="x", is_staff=True)
    editor.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_queueconfig", "change_queueconfig"],
            content_type__app_label="queue_engine",
        )
    )
    client = Client()
    client.force_login(editor)

    page = client.get("/admin/queue_engine/queueconfig/")
    reset = client.post(
        "/admin/queue_engine/queueconfig/", {"action": "reset", "_selected_action": ["emails"]}
    )

    assert "paused queues stay paused" in page.content.decode()
    assert reset.status_code == 302
    config = QueueConfig.objects.get(name="emails")
    assert (config.paused, config.max_concurrency, config.edited_fields) == (True, None, ["paused"])
    event = AuditEvent.objects.get(actor="editor")
    assert (event.action, event.details) == (
        "queue_config_reset",
        {"changes": {"max_concurrency": [8, None]}, "handed_back": ["max_concurrency"]},
    )


@pytest.mark.django_db
def test_reset_hands_paused_back_only_when_named() -> None:
    ops_queues.pause_queue("emails", actor="alice")

    ops_queues.reset_queue_config("emails", actor="bob")
    kept = QueueConfig.objects.get(name="emails")
    ops_queues.reset_queue_config("emails", "paused", actor="bob")

    assert (kept.paused, kept.edited_fields) == (True, ["paused"])
    config = QueueConfig.objects.get(name="emails")
    assert (config.paused, config.edited_fields) == (False, [])
    assert [e.details for e in AuditEvent.objects.filter(actor="bob").order_by("id")] == [
        {"changes": {"paused": [True, False]}, "handed_back": ["paused"]},
    ]


@pytest.mark.django_db
def test_admin_actions_need_the_operator_permission(viewer: Client) -> None:
    live = jobs.noop.enqueue()

    page = viewer.get("/admin/queue_engine/job/")
    attempt = viewer.post(
        "/admin/queue_engine/job/", {"action": "cancel", "_selected_action": [live.id]}
    )

    assert page.status_code == 200 and 'value="cancel"' not in page.content.decode()
    assert attempt.status_code in (200, 302)
    assert Job.objects.get(pk=live.id).state == "available"
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_set_group_limit_adds_changes_and_removes_an_override_with_audit() -> None:
    ops_queues.set_group_limit("emails", "acme/eu", 2, actor="alice")
    ops_queues.set_group_limit("emails", "acme/eu", 5, actor="alice")
    ops_queues.set_group_limit("emails", "acme/eu", 5, actor="alice")
    kept = list(GroupLimit.objects.values_list("queue", "group_key", "max_concurrency"))

    held = ops_queues.set_group_limit("emails", "acme/eu", 0, actor="bob")
    assert held is not None and held.max_concurrency == 0  # a hold: none of its jobs start
    removed = ops_queues.set_group_limit("emails", "acme/eu", None, actor="bob")

    assert kept == [("emails", "acme/eu", 5)] and removed is None
    assert not GroupLimit.objects.exists()
    events = AuditEvent.objects.order_by("id")
    assert [(e.actor, e.action, e.target, e.details) for e in events] == [
        (
            "alice",
            "group_limit",
            "emails",
            {"group_key": "acme/eu", "changes": {"max_concurrency": [None, 2]}},
        ),
        (
            "alice",
            "group_limit",
            "emails",
            {"group_key": "acme/eu", "changes": {"max_concurrency": [2, 5]}},
        ),
        (
            "bob",
            "group_limit",
            "emails",
            {"group_key": "acme/eu", "changes": {"max_concurrency": [5, 0]}},
        ),
        (
            "bob",
            "group_limit",
            "emails",
            {"group_key": "acme/eu", "changes": {"max_concurrency": [0, None]}},
        ),
    ]


@pytest.mark.django_db
def test_the_claim_reads_group_limits_as_set_group_limit_writes_them() -> None:
    Job.objects.create(kind="tests.noop", queue="emails", group_key="acme", state="running")
    Job.objects.create(kind="tests.noop", queue="other", group_key="acme", state="running")

    def room(key: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT room FROM queue_engine_limited_rooms(%s, 10, %s, %s, %s) "
                "WHERE group_key IS NOT NULL",
                [["emails"], ["emails"], [key], [7]],
            )
            return cursor.fetchone()[0]

    ops_queues.set_group_limit("emails", "acme", 2)
    capped = (room("acme"), room("other"))
    ops_queues.set_group_limit("emails", "acme", None)

    assert capped == (1, 7)
    assert room("acme") == 6


@pytest.mark.django_db
def test_a_limited_queues_room_is_counted_with_its_keys() -> None:
    QueueConfig.objects.update_or_create(
        name="emails", defaults={"max_concurrency": 5, "rate_limit": 100, "rate_window": 60}
    )
    for key in ("acme", "acme", None):
        Job.objects.create(kind="tests.noop", queue="emails", group_key=key, state="running")
    Job.objects.create(kind="tests.noop", queue="other", state="running")

    def rooms(want: int) -> dict[str | None, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT group_key, room FROM queue_engine_limited_rooms(%s, %s, %s, %s, %s)",
                [["emails"], want, ["emails"], ["acme"], [4]],
            )
            return dict(cursor.fetchall())

    assert rooms(10) == {None: 2, "acme": 2}  # the cap: 5 - 3 running; the key: 4 - 2
    assert rooms(1) == {None: 1, "acme": 2}  # no more than the claim wants
    ClaimLog.objects.create(queue="emails", count=99)
    assert rooms(10) == {None: 1, "acme": 2}  # the rate limit: 100 - 99 started


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("queue", "key", "limit", "message"),
    [
        ("", "acme", 2, "A queue name has 1 to 128 characters"),
        ("emails", "", 2, "a group key has 1 to 255 characters"),
        ("emails", "k" * 256, 2, "a group key has 1 to 255 characters"),
        ("emails", 7, 2, "a group key has 1 to 255 characters"),
        ("emails", "acme", -1, "it must be a whole number from 0 (hold the group) to"),
        ("emails", "acme", "3", "or None to remove it, not '3'"),
        ("emails", "acme", True, "it must be a whole number"),
        ("emails", "acme", 10**12, "it must be a whole number"),
    ],
)
def test_bad_group_limits_are_refused_and_nothing_is_written(queue, key, limit, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpsError) as caught:
        ops_queues.set_group_limit(queue, key, limit)

    assert message in str(caught.value)
    assert not GroupLimit.objects.exists() and not AuditEvent.objects.exists()
