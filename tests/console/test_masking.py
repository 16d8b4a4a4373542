"""Masked values (CONSOLE_MASKED_KEYS) stay hidden everywhere they could be read: the
admin's job pages and list filters, and the console's containment filters."""

from __future__ import annotations

import json
import re
from html import escape, unescape

import pytest
from django.test import Client

from queue_engine import schedules
from queue_engine.models import AuditEvent, Job, JobRecord, Schedule
from tests.support import console_data, jobs
from tests.support.console_data import ConsoleData

pytestmark = pytest.mark.django_db

SECRETS = ("hunter2", "Bearer abc", "tok_live_SECRET1234", "s3cr3t", "m3ta-s3cret")
MASKED = escape('"db_password": "********"')


@pytest.fixture
def data(db: None) -> ConsoleData:
    seeded = console_data.seed()
    Job.objects.filter(pk=seeded.running.id).update(
        meta={"webhook_secret": "m3ta-s3cret", "tenant": "acme"}
    )
    JobRecord.objects.filter(pk=seeded.succeeded[0].id).update(
        payload={"to": "done0@example.com", "smtp_password": "hunter2"}
    )
    return seeded


def listed(page: str) -> set[int]:
    return {int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)}


# --- the admin ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["job", "jobrecord"])
def test_the_admin_lists_payloads_masked(
    admin_client: Client, data: ConsoleData, model: str
) -> None:
    page = admin_client.get(f"/admin/queue_engine/{model}/").content.decode()

    assert not [s for s in SECRETS if s in page]
    assert escape('"to": "') in page, "payloads are listed"
    assert "********" in page


def test_the_admin_shows_a_live_job_masked(admin_client: Client, data: ConsoleData) -> None:
    response = admin_client.get(f"/admin/queue_engine/job/{data.running.id}/change/")

    page = response.content.decode()
    assert response.status_code == 200
    assert not [s for s in SECRETS if s in page]
    assert MASKED in page
    assert escape('"webhook_secret": "********"') in page
    assert escape('"Authorization": "********"') in page
    assert escape('"region": "eu"') in page and escape('"tenant": "acme"') in page


def test_the_admin_shows_an_ended_job_masked(admin_client: Client, data: ConsoleData) -> None:
    response = admin_client.get(f"/admin/queue_engine/jobrecord/{data.succeeded[0].id}/change/")

    page = response.content.decode()
    assert response.status_code == 200
    assert not [s for s in SECRETS if s in page]
    assert escape('"session_secret": "********"') in page
    assert escape('"smtp_password": "********"') in page
    assert escape('"delivered_to": "done0@example.com"') in page


@pytest.mark.parametrize(
    "lookup",
    [
        "payload__db_password=hunter2",
        "payload__nested__Authorization=Bearer abc",
        'payload__contains={"db_password": "hunter2"}',
        "meta__webhook_secret=m3ta-s3cret",
        "payload__rows=20",
    ],
)
def test_the_admin_list_refuses_lookups_into_masked_fields(
    admin_client: Client, data: ConsoleData, lookup: str
) -> None:
    response = admin_client.get(f"/admin/queue_engine/job/?{lookup}")

    assert response.status_code == 400
    assert f"/admin/queue_engine/job/{data.running.id}/change/" not in response.content.decode()


def test_the_admin_list_still_filters_on_its_own_filters(
    admin_client: Client, data: ConsoleData
) -> None:
    page = admin_client.get("/admin/queue_engine/job/?state__exact=running").content.decode()

    assert f"/admin/queue_engine/job/{data.running.id}/change/" in page


# --- the console's containment filters ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "key"),
    [
        ("payload", '{"db_password": "hunter2"}', "db_password"),
        ("payload", '{"nested": {"Authorization": "Bearer abc"}}', "Authorization"),
        ("payload", '{"items": [{"api_token": "x"}]}', "api_token"),
        ("meta", '{"webhook_secret": "m3ta-s3cret"}', "webhook_secret"),
    ],
)
def test_a_containment_filter_naming_a_masked_key_is_refused(
    viewer: Client, data: ConsoleData, name: str, value: str, key: str
) -> None:
    right = viewer.get("/jobs/", {name: value}).content.decode()
    wrong = viewer.get("/jobs/", {name: value.replace("hunter2", "hunter3")}).content.decode()

    assert (
        escape(f"The {name} filter names the key {key!r}, whose values the console masks") in right
    )
    assert "It was left out." in right
    assert listed(right) == listed(wrong), "the answer does not depend on the guess"


@pytest.mark.parametrize(
    ("name", "value"),
    [("payload", '{"nested": {"region": "eu"}}'), ("meta", '{"tenant": "acme"}')],
)
def test_a_containment_filter_on_unmasked_keys_still_filters(
    viewer: Client, data: ConsoleData, name: str, value: str
) -> None:
    page = viewer.get("/jobs/", {name: value}).content.decode()

    assert listed(page) == {data.running.id}
    assert "masks" not in page


def test_all_that_match_refuses_a_filter_naming_a_masked_key(
    operator: Client, data: ConsoleData
) -> None:
    form = {
        "action": "cancel",
        "scope": "matching",
        "match_payload": '{"db_password": "hunter2"}',
        "confirm": "yes",
        "upto": data.running.id,
    }

    response = operator.post("/jobs/bulk/", form, follow=True)

    assert "whose values the console masks" in response.content.decode()
    assert not AuditEvent.objects.filter(actor="user-operator").exists()
    assert Job.objects.filter(pk=data.running.id, meta__has_key="cancel_requested").count() == 0


# --- short words and URLs -----------------------------------------------------------------

URL_SECRETS = ("pg-SECRET", "r-SECRET", "p4ss", "pwd-VALUE", "dbp-VALUE")
URL_PAYLOAD = {
    "db_url": "postgres://u:pg-SECRET@h/db",
    "replicas": ["redis://:r-SECRET@r:6379/0", "see https://host:443/a@b"],
    "pass": "p4ss",
    "login": {"userPwd": "pwd-VALUE", "DB_PASS": "dbp-VALUE"},
    "passenger": "Ann",
    "compass": "north",
}


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("pass", True),
        ("db_pass", True),
        ("dbPass", True),
        ("DB-PASS", True),
        ("pwd", True),
        ("userPwd", True),
        ("passphrase", True),
        ("api_key", True),
        ("apikey", True),
        ("Authorization", True),
        ("passenger", False),
        ("bypass", False),
        ("compass", False),
        ("tenant", False),
    ],
)
def test_which_keys_are_masked(key: str, secret: bool) -> None:
    from queue_engine.masking import rule

    assert rule().is_secret(key) is secret


def test_a_url_keeps_everything_but_its_password() -> None:
    from queue_engine.masking import mask

    shown = mask(URL_PAYLOAD)

    assert shown["db_url"] == "postgres://u:********@h/db"
    assert shown["replicas"] == ["redis://:********@r:6379/0", "see https://host:443/a@b"]
    assert shown["login"] == {"userPwd": "********", "DB_PASS": "********"}
    assert shown["passenger"] == "Ann" and shown["compass"] == "north"


@pytest.fixture
def url_job(db: None) -> Job:
    return Job.objects.create(
        kind="tests.noop", queue="emails", payload=URL_PAYLOAD, meta={"dsn": URL_PAYLOAD["db_url"]}
    )


@pytest.mark.parametrize(
    "url",
    ["/jobs/{id}/", "/jobs/", "/admin/queue_engine/job/{id}/change/", "/admin/queue_engine/job/"],
)
def test_short_words_and_url_passwords_are_masked_on_every_page(
    admin_client: Client, url_job: Job, url: str
) -> None:
    from django.contrib.auth.models import Group

    admin_user = admin_client.get("/admin/").wsgi_request.user
    admin_user.groups.add(Group.objects.get(name="viewer"))  # type: ignore[union-attr]

    page = admin_client.get(url.format(id=url_job.id)).content.decode()

    assert not [s for s in URL_SECRETS if s in page]
    if "{id}" in url:
        assert "postgres://u:********@h/db" in page
        assert "Ann" in page


def test_a_containment_filter_on_a_url_with_a_password_is_refused(
    viewer: Client, url_job: Job
) -> None:
    page = viewer.get("/jobs/", {"payload": '{"db_url": "postgres://u:pg-SECRET@h/db"}'})

    assert (
        "names the key &#x27;db_url&#x27;, whose values the console masks" in page.content.decode()
    )


# --- the admin's schedule form ------------------------------------------------------------

SCHEDULE_FORM = {
    "kind": "tests.noop",
    "cron": "0 3 * * *",
    "timezone": "UTC",
    "every": "",
    "queue": "",
    "priority": "",
    "enabled": "on",
    "missed_fire_policy": "run_once",
}


@pytest.fixture
def secret_schedule(db: None) -> Schedule:
    return schedules.upsert_cron(
        "nightly", jobs.noop, cron="0 3 * * *", payload={"to": "ops", **URL_PAYLOAD}
    )


def test_the_admin_schedule_form_shows_secrets_masked_and_keeps_them(
    admin_client: Client, secret_schedule: Schedule
) -> None:
    url = f"/admin/queue_engine/schedule/{secret_schedule.pk}/change/"

    page = admin_client.get(url).content.decode()
    shown = json.loads(unescape(re.findall(r'name="payload"[^>]*>(.*?)</textarea>', page, re.S)[0]))
    saved = admin_client.post(url, {**SCHEDULE_FORM, "payload": json.dumps({**shown, "to": "dev"})})

    assert not [s for s in URL_SECRETS if s in page]
    assert shown["pass"] == "********"
    assert saved.status_code == 302
    assert Schedule.objects.get().payload == {"to": "dev", **URL_PAYLOAD}


def test_the_admin_schedule_form_refuses_a_mask_it_cannot_give_back(
    admin_client: Client, secret_schedule: Schedule
) -> None:
    url = f"/admin/queue_engine/schedule/{secret_schedule.pk}/change/"

    refused = admin_client.post(url, {**SCHEDULE_FORM, "payload": '{"api_token": "********"}'})

    assert "The payload still reads ******** at api_token" in refused.content.decode()
    assert Schedule.objects.get().payload == {"to": "ops", **URL_PAYLOAD}


def test_a_view_only_admin_sees_a_schedule_s_payload_masked(secret_schedule: Schedule) -> None:
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("auditor", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client = Client()
    client.force_login(user)

    page = client.get(f"/admin/queue_engine/schedule/{secret_schedule.pk}/change/")

    assert page.status_code == 200
    assert "postgres://u:********@h/db" in page.content.decode()
    assert not [s for s in URL_SECRETS if s in page.content.decode()]
