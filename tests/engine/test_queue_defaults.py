"""Queue settings from QUEUE_ENGINE["QUEUES"] and ["QUEUE_DEFAULTS"]: where a queue starts,
what a worker start or a migrate applies, and that an operator's edits win."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from queue_engine.models import AuditEvent, QueueConfig, QueueDefaults
from queue_engine.ops import queues as ops_queues
from tests.support import jobs
from tests.support.workers import Workers, wait_for

EMAILS = {"max_concurrency": 5, "rate_limit": 100, "lock_duration": 30, "group_concurrency": 2}
ENGINE = {"QUEUES": {"emails": EMAILS}, "QUEUE_DEFAULTS": {"retain_succeeded": 3600}}
FIELDS = ("paused", *ops_queues.LIMITS)


def values(name: str) -> dict[str, Any]:
    config = QueueConfig.objects.get(name=name)
    return {f: getattr(config, f) for f in FIELDS}


@pytest.fixture
def engine(settings):  # type: ignore[no-untyped-def]
    """Set QUEUE_ENGINE options for this test: engine(QUEUES=..., QUEUE_DEFAULTS=...)."""

    def configure(**options: Any) -> None:
        settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, **options}

    return configure


@pytest.mark.django_db
def test_declaring_creates_the_named_queues_with_their_settings(engine) -> None:  # type: ignore[no-untyped-def]
    engine(**ENGINE)
    call_command("check")  # good settings pass

    changed = ops_queues.declare_configured()

    assert values("emails") == {
        "paused": False,
        "max_concurrency": 5,
        "rate_limit": 100,
        "rate_window": 60,
        "lock_duration": 30,
        "group_concurrency": 2,
        "retain_succeeded": 3600,  # from QUEUE_DEFAULTS
        "retain_failed": 604800,
        "retain_cancelled": 86400,
    }
    assert changed == {} and not AuditEvent.objects.exists()  # created, not changed
    assert QueueConfig.objects.get(name="emails").edited_fields == []


@pytest.mark.django_db
def test_a_queue_first_seen_by_an_enqueue_starts_with_queue_defaults(engine) -> None:  # type: ignore[no-untyped-def]
    engine(QUEUE_DEFAULTS={"max_concurrency": 3, "retain_failed": 60, "lock_duration": 90})
    ops_queues.declare_configured()

    jobs.noop.using(queue="fresh").enqueue()
    ops_queues.pause_queue("never-used", actor="ops")

    for name in ("fresh", "never-used"):
        config = values(name)
        assert (config["max_concurrency"], config["retain_failed"], config["lock_duration"]) == (
            3,
            60,
            90,
        )
    assert values("never-used")["paused"] is True


@pytest.mark.django_db
def test_without_declared_defaults_an_enqueued_queue_gets_the_model_defaults() -> None:
    QueueDefaults.objects.all().delete()  # as after a flush of the tables

    jobs.noop.using(queue="fresh").enqueue()

    assert values("fresh") == {
        "paused": False,
        "max_concurrency": None,
        "rate_limit": None,
        "rate_window": 60,
        "lock_duration": 60,
        "group_concurrency": None,
        "retain_succeeded": 86400,
        "retain_failed": 604800,
        "retain_cancelled": 86400,
    }


@pytest.mark.django_db
def test_a_settings_change_reaches_existing_queues_but_not_what_an_operator_changed(engine) -> None:  # type: ignore[no-untyped-def]
    engine(**ENGINE)
    ops_queues.declare_configured()
    jobs.noop.using(queue="other").enqueue()
    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=8)
    ops_queues.pause_queue("emails", actor="alice")
    engine(
        QUEUES={"emails": {**EMAILS, "max_concurrency": 10, "lock_duration": 45}},
        QUEUE_DEFAULTS={"retain_succeeded": 7200, "paused": False},
    )

    changed = ops_queues.declare_configured()

    emails, other = values("emails"), values("other")
    assert (emails["max_concurrency"], emails["paused"]) == (8, True)  # alice's
    assert (emails["lock_duration"], emails["retain_succeeded"]) == (45, 7200)
    assert other["retain_succeeded"] == 7200 and other["lock_duration"] == 60
    assert QueueConfig.objects.get(name="emails").edited_fields == ["max_concurrency", "paused"]
    assert changed == {
        "emails": ["lock_duration", "retain_succeeded"],
        "other": ["retain_succeeded"],
    }
    assert list(
        AuditEvent.objects.filter(actor="settings").order_by("id").values_list("target", "details")
    ) == [
        ("emails", {"changes": {"lock_duration": [30, 45], "retain_succeeded": [3600, 7200]}}),
        ("other", {"changes": {"retain_succeeded": [3600, 7200]}}),
    ]


@pytest.mark.django_db
def test_reset_hands_edited_fields_back_to_settings(engine) -> None:  # type: ignore[no-untyped-def]
    engine(**ENGINE)
    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=8, rate_limit=None)

    ops_queues.reset_queue_config("emails", "max_concurrency", actor="bob")
    partly = QueueConfig.objects.get(name="emails")
    ops_queues.reset_queue_config("emails", actor="bob")

    assert (partly.max_concurrency, partly.rate_limit, partly.edited_fields) == (
        5,
        None,
        ["rate_limit"],
    )
    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.rate_limit, config.edited_fields) == (5, 100, [])
    assert [e.details for e in AuditEvent.objects.filter(actor="bob").order_by("id")] == [
        {"changes": {"max_concurrency": [8, 5]}, "handed_back": ["max_concurrency"]},
        {"changes": {"rate_limit": [None, 100]}, "handed_back": ["rate_limit"]},
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"QUEUES": {"emails": {"max_concurrency": 0}}},
            "QUEUE_ENGINE['QUEUES']['emails']['max_concurrency'] must be a whole number "
            "from 1 to 316224000, or None for no limit, not 0.",
        ),
        (
            {"QUEUES": {"emails": {"concurrency": 5}}},
            "QUEUE_ENGINE['QUEUES']['emails'] has unknown setting(s) concurrency; the settings "
            "are paused, max_concurrency, rate_limit, rate_window, lock_duration, "
            "group_concurrency, retain_succeeded, retain_failed, retain_cancelled, "
            "rate_limit_per_key, fair_share.",
        ),
        (
            {"QUEUE_DEFAULTS": {"paused": "no"}},
            "QUEUE_ENGINE['QUEUE_DEFAULTS']['paused'] must be True or False.",
        ),
        (
            {"QUEUES": {"reports": {"lock_duration": None}}},
            "QUEUE_ENGINE['QUEUES']['reports']['lock_duration'] must be a whole number "
            "from 1 to 316224000, not None.",
        ),
        (
            {"QUEUES": {"x" * 129: {}}},
            "QUEUE_ENGINE['QUEUES'] names a bad queue: A queue name has 1 to 128 characters",
        ),
        ({"LOCK_DURATION": "30s"}, "QUEUE_ENGINE['LOCK_DURATION'] must be a number of seconds"),
        ({"QUEUES": ["emails"]}, "QUEUE_ENGINE['QUEUES'] must map queue names to dicts"),
    ],
)
def test_a_bad_queue_setting_fails_the_system_check_and_writes_nothing(
    engine,  # type: ignore[no-untyped-def]
    options: dict[str, Any],
    message: str,
) -> None:
    engine(**options)
    before = list(QueueDefaults.objects.values())

    with pytest.raises(SystemCheckError) as check:
        call_command("check")
    with pytest.raises(ImproperlyConfigured):
        ops_queues.declare_configured()

    assert message in str(check.value) and "queue_engine.E021" in str(check.value)
    assert list(QueueDefaults.objects.values()) == before
    assert not QueueConfig.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_lock_duration_option_is_the_default_lease_when_queue_settings_give_none(engine) -> None:  # type: ignore[no-untyped-def]
    engine(LOCK_DURATION=120.5, **ENGINE)

    ops_queues.declare_configured()
    jobs.noop.using(queue="fresh").enqueue()

    assert values("fresh")["lock_duration"] == 121
    assert values("emails")["lock_duration"] == 30


@pytest.mark.django_db
def test_migrate_declares_the_queue_settings(engine) -> None:  # type: ignore[no-untyped-def]
    engine(**ENGINE)

    call_command("migrate", verbosity=0)

    assert values("emails")["max_concurrency"] == 5
    assert QueueDefaults.objects.get().retain_succeeded == 3600


@pytest.mark.django_db
def test_admin_records_only_the_fields_it_changed(engine, admin_client: Client) -> None:  # type: ignore[no-untyped-def]
    engine(**ENGINE)
    form = admin_client.get("/admin/queue_engine/queueconfig/add/").context["adminform"].form
    shown = {f: form.fields[f].initial for f in FIELDS}
    data = {f: v for f, v in shown.items() if v not in (None, False)}

    response = admin_client.post(
        "/admin/queue_engine/queueconfig/add/", {**data, "name": "emails", "rate_window": 30}
    )

    assert shown["retain_succeeded"] == 3600  # the form shows QUEUE_DEFAULTS
    assert response.status_code == 302
    config = QueueConfig.objects.get(name="emails")
    # What was left as shown comes from QUEUES["emails"]; what was changed is the admin's.
    assert (config.rate_window, config.max_concurrency, config.lock_duration) == (30, 5, 30)
    assert config.edited_fields == ["rate_window"]


@pytest.mark.slow
def test_workers_apply_queue_settings_at_start_and_keep_operator_edits(workers: Workers) -> None:
    def start(engine: dict[str, Any]) -> None:
        workers.start(
            env={
                "DJANGO_SETTINGS_MODULE": "tests.support.settings_queues",
                "TEST_QUEUE_ENGINE": json.dumps(engine),
            }
        )

    start(ENGINE)
    wait_for(lambda: QueueConfig.objects.filter(name="emails").exists(), timeout=45)
    started = values("emails")
    jobs.noop.using(queue="fresh").enqueue()  # this process's settings have no QUEUE_DEFAULTS
    ops_queues.update_queue_config("emails", actor="alice", max_concurrency=1)
    workers.stop_all()

    start({**ENGINE, "QUEUES": {"emails": {**EMAILS, "max_concurrency": 9, "rate_window": 10}}})
    wait_for(lambda: values("emails")["rate_window"] == 10, timeout=45, message="the second start")

    assert (started["max_concurrency"], started["lock_duration"]) == (5, 30)
    assert values("fresh")["retain_succeeded"] == 3600
    assert values("emails")["max_concurrency"] == 1
    assert "queue emails: rate_window set from settings" in workers.output()
