"""Every console filter and form field with text Postgres cannot hold, or a lot of it:
a 400 that says what was wrong (a NUL), a page or a redirect with a message (a long
value), never a 500, and nothing written."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from queue_engine.console.queue_form import FIELDS
from queue_engine.flows import Flow
from queue_engine.models import (
    AuditEvent,
    GroupLimit,
    Job,
    JobRecord,
    QueueConfig,
    Schedule,
)
from tests.support import console_data, jobs
from tests.support.console_data import ConsoleData

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
LONG = "x" * 10_000
BAD = {"nul": NUL, "long": LONG}

GET_FIELDS = [
    *(("/jobs/", f) for f in ("queue", "state", "kind", "q", "range", "payload", "meta")),
    *(("/jobs/", f) for f in ("before", "after")),
    *(("/flows/", f) for f in ("state", "q", "range", "before", "after")),
    *(("/audit/", f) for f in ("actor", "action", "before")),
    ("/queues/emails/", "window"),
]

MATCHING = [f"match_{f}" for f in ("queue", "state", "kind", "q", "payload", "meta", "since")]
CONFIRMED = {"confirm": "yes"}


def post_forms(data: ConsoleData, flow_id: int) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(url, a form that would be accepted, the fields each test replaces in turn). The
    forms that confirm act unless the replaced field stops them: a field naming what to act
    on must stop them."""
    dead = data.dead[-1].id
    group = {"action": "redrive", "queue": "billing", "error_class": "demo.CardDeclined"}
    return [
        (
            "/jobs/bulk/",
            {"action": "retry", "ids": [data.dead[0].id]},
            ["action", "ids", "next", "scope", "confirm"],
        ),
        ("/jobs/bulk/", {"action": "retry", "scope": "matching"}, [*MATCHING, "upto"]),
        (
            "/jobs/bulk/",
            {"action": "retry", "scope": "matching", "upto": dead, **CONFIRMED},
            MATCHING,
        ),
        (f"/flows/{flow_id}/action/", {"action": "cancel"}, ["action", "confirm"]),
        ("/dead/group/", {**group, "upto": dead}, ["action", "queue", "error_class", "upto"]),
        ("/dead/group/", {**group, "upto": dead, **CONFIRMED}, ["queue", "error_class"]),
        ("/schedules/action/", {"name": "digest", "action": "disable"}, ["name", "action"]),
        ("/schedules/action/", {"name": "digest", "action": "run_now"}, ["name"]),
        ("/queues/emails/redrive/", {}, ["confirm"]),
        ("/queues/emails/config/", {"max_concurrency": "3"}, [*FIELDS, "confirm"]),
        ("/queues/emails/config/", {"max_concurrency": "3", **CONFIRMED}, list(FIELDS)),
        ("/queues/emails/config/reset/", {}, ["field", "confirm"]),
        (
            "/queues/emails/group-limit/",
            {"group_key": "acme", "max_concurrency": "2"},
            ["group_key", "max_concurrency", "confirm"],
        ),
        (
            "/queues/emails/group-limit/",
            {"group_key": "acme", "max_concurrency": "2", **CONFIRMED},
            ["group_key", "max_concurrency"],
        ),
    ]


QUEUE_ACTIONS = ["pause", "resume", "redrive", "config", "config/reset", "group-limit"]


def snapshot() -> tuple[Any, ...]:
    """What an action could change."""
    return (
        AuditEvent.objects.count(),
        sorted(Job.objects.values_list("id", "state", "run_at", "meta")),
        sorted(JobRecord.objects.values_list("id", "state")),
        sorted(QueueConfig.objects.values_list()),
        sorted(GroupLimit.objects.values_list("queue", "group_key", "max_concurrency")),
        sorted(Schedule.objects.values_list("name", "enabled", "next_fire_at")),
    )


@pytest.fixture
def data(db: None) -> ConsoleData:
    return console_data.seed()


@pytest.fixture
def flow_id(db: None) -> int:
    flow = Flow("nightly")
    flow.add("extract", jobs.node, label="extract")
    return flow.submit()


def assert_refused_or_answered(response: Any, bad: str) -> None:
    page = response.content.decode()
    if bad == "nul":
        assert response.status_code == 400, response.status_code
        assert "has a NUL character (\\x00) in it, which Postgres cannot store" in page
        assert "remove it and try again" in page
    else:
        assert response.status_code in (200, 302, 400, 404), response.status_code


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize(("url", "name"), GET_FIELDS)
def test_a_filter_postgres_cannot_hold_is_refused(
    viewer: Client, data: ConsoleData, url: str, name: str, bad: str
) -> None:
    response = viewer.get(url, {name: BAD[bad]})

    assert_refused_or_answered(response, bad)
    if bad == "nul":
        assert escape(f"The field {name!r} has a NUL character") in response.content.decode()


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("form", range(14))
def test_a_form_field_postgres_cannot_hold_writes_nothing(
    operator: Client, data: ConsoleData, flow_id: int, form: int, bad: str
) -> None:
    url, accepted, names = post_forms(data, flow_id)[form]

    for name in names:
        before = snapshot()
        response = operator.post(url, {**accepted, name: BAD[bad]})

        assert_refused_or_answered(response, bad)
        assert snapshot() == before, f"{url} {name} wrote"


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("action", QUEUE_ACTIONS)
def test_a_queue_name_postgres_cannot_hold_writes_nothing(
    operator: Client, data: ConsoleData, action: str, bad: str
) -> None:
    before = snapshot()

    response = operator.post(
        f"/queues/{quote(BAD[bad])}/{action}/",
        {"group_key": "acme", "max_concurrency": "2", **CONFIRMED},
    )

    assert_refused_or_answered(response, bad)
    assert snapshot() == before


@pytest.mark.parametrize("bad", list(BAD))
def test_a_queue_page_named_with_text_postgres_cannot_hold_is_refused(
    viewer: Client, data: ConsoleData, bad: str
) -> None:
    response = viewer.get(f"/queues/{quote(BAD[bad])}/")

    assert_refused_or_answered(response, bad)
    if bad == "nul":
        assert "The name in the address has a NUL character" in response.content.decode()


@pytest.mark.parametrize(
    "url", ["/queues/%ED%A0%80/", "/jobs/?q=%ED%A0%80", "/audit/?actor=%ED%A0%80"]
)
def test_a_lone_surrogate_in_the_address_is_no_500(
    viewer: Client, data: ConsoleData, url: str
) -> None:
    # Django decodes a broken UTF-8 sequence to U+FFFD (the query) or leaves it
    # percent-encoded (the path): no lone surrogate reaches a view as a str.
    response = viewer.get(url)

    assert response.status_code in (200, 404)


def test_a_field_name_postgres_cannot_hold_is_refused(viewer: Client, data: ConsoleData) -> None:
    response = viewer.get("/jobs/?q%00=x")

    assert response.status_code == 400
    assert "A field name has a NUL character" in response.content.decode()


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("name", ["username", "password", "next"])
def test_the_login_form_answers_text_postgres_cannot_hold(
    client: Client, make_user: Any, name: str, bad: str
) -> None:
    make_user("viewer", password="right-horse")
    form = {"username": "user-viewer", "password": "wrong", "next": "/jobs/"}

    response = client.post("/login/", {**form, name: BAD[bad]})

    assert response.status_code in (200, 302, 400)
    assert "_auth_user_id" not in client.session
