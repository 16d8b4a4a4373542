"""The console's pages and actions through Django's test client, on realistic data."""

from __future__ import annotations

import re
from html import escape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from queue_engine import reads
from queue_engine.console import actions
from queue_engine.models import AuditEvent, Job, JobRecord, QueueConfig
from tests.support import console_data, jobs
from tests.support.console_data import XSS, ConsoleData
from tests.support.console_users import client_for
from tests.support.workers import wait_for

pytestmark = pytest.mark.django_db

PAGES = ["/", "/jobs/", "/dead/", "/schedules/", "/workers/", "/audit/", "/queues/emails/"]


@pytest.fixture
def data(db: None) -> ConsoleData:
    return console_data.seed()


def text_of(response) -> str:  # type: ignore[no-untyped-def]
    return response.content.decode()


# --- access --------------------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/jobs/1/"])
def test_anonymous_users_are_sent_to_the_login_page(client: Client, url: str) -> None:
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_logging_in_leads_to_the_page_asked_for(make_user, client: Client) -> None:
    make_user("viewer", password="pw-for-tests")

    response = client.post(
        "/login/?next=/jobs/",
        {"username": "user-viewer", "password": "pw-for-tests", "next": "/jobs/"},
    )

    assert response.status_code == 302
    assert response["Location"] == "/jobs/"
    assert client.get("/jobs/").status_code == 200


def test_login_page_renders_for_anonymous_users(client: Client) -> None:
    response = client.get("/login/")

    assert response.status_code == 200
    assert "Sign in to the console" in text_of(response)


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_a_console_role_is_refused(make_user, url: str) -> None:
    client = client_for(make_user(None))

    response = client.get(url)

    assert response.status_code == 403
    assert "viewer" in text_of(response)


def test_the_admin_keeps_its_own_login(client: Client) -> None:
    response = client.get("/admin/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_superusers_from_ensure_admin_can_operate(data: ConsoleData) -> None:
    from django.core.management import call_command

    call_command("ensure_admin", stdout=open("/dev/null", "w"))  # noqa: SIM115
    client = client_for(User.objects.get(username="admin"))

    response = client.post("/jobs/bulk/", {"action": "retry", "ids": [data.dead[0].id]})

    assert response.status_code == 200
    assert "Retry 1 job?" in text_of(response)


# --- every page with realistic data ---------------------------------------------------


def test_overview_shows_queues_depths_workers_and_failures(
    viewer: Client, data: ConsoleData
) -> None:
    page = text_of(viewer.get("/"))

    for queue in ("billing", "emails", "media", "reports"):
        assert f'href="/queues/{queue}/"' in page
    assert "Recent failures" in page
    assert "CardDeclined" in page
    # the three "card for order N was declined" failures are one group
    assert re.search(r"CardDeclined.*?count-cell\">3<", page, re.S)
    # billing's jobs died in the last hour: its sparkline has a failure line
    billing = page[page.index('href="/queues/billing/"') :]
    billing = billing[: billing.index("</tr>")]
    assert '<polyline class="failed" points="' in billing


def test_paused_queues_say_so(viewer: Client, data: ConsoleData) -> None:
    QueueConfig.objects.filter(name="media").update(paused=True)

    page = text_of(viewer.get("/"))

    assert re.search(r'href="/queues/media/">media</a>\s*<span class="badge s-paused">paused', page)


@pytest.mark.parametrize(
    "params",
    [
        "",
        "?state=failed",
        "?state=available&queue=emails",
        "?kind=demo.charge_card",
        "?q=Email",
        "?range=1h",
        '?payload={"to": "done1@example.com"}',
    ],
)
def test_jobs_list_renders_with_filters(viewer: Client, data: ConsoleData, params: str) -> None:
    response = viewer.get("/jobs/" + params)

    assert response.status_code == 200
    assert "Jobs" in text_of(response)


def test_jobs_list_filters_by_state_and_queue(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/jobs/?state=failed&queue=billing"))

    ids = {int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)}
    assert ids == {r.id for r in data.dead}


def test_jobs_list_filters_by_payload_containment(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get('/jobs/?payload={"to": "done1@example.com"}'))

    ids = {int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)}
    assert ids == {data.succeeded[1].id}


def test_jobs_list_filters_by_meta_containment(viewer: Client, data: ConsoleData) -> None:
    Job.objects.filter(pk=data.available[0].id).update(meta={"tenant": "acme", "tier": 1})
    Job.objects.filter(pk=data.available[1].id).update(meta={"tenant": "globex"})

    page = text_of(viewer.get('/jobs/?meta={"tenant": "acme"}'))
    bad = text_of(viewer.get("/jobs/?meta=[1"))

    ids = {int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)}
    assert ids == {data.available[0].id}
    assert "The meta filter must be a JSON object" in bad


def test_all_that_match_honours_the_meta_filter(operator: Client, data: ConsoleData) -> None:
    Job.objects.filter(pk__in=[j.id for j in data.available[:2]]).update(meta={"tenant": "acme"})

    page = text_of(operator.post("/jobs/bulk/", matching_form("cancel", meta='{"tenant": "acme"}')))

    assert "Cancel 2 jobs?" in page


def test_jobs_filter_by_group_key_live_and_ended(viewer: Client, data: ConsoleData) -> None:
    Job.objects.filter(pk__in=[j.id for j in data.available[:2]]).update(group_key="tenant-7")
    Job.objects.filter(pk=data.available[2].id).update(group_key="tenant-70")
    ended = JobRecord.objects.filter(queue="emails", state="succeeded").first()
    assert ended is not None
    JobRecord.objects.filter(pk=ended.pk, state="succeeded").update(group_key="tenant-7")

    page = text_of(viewer.get("/jobs/?group=tenant-7"))

    ids = {int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)}
    assert ids == {data.available[0].id, data.available[1].id, ended.pk}  # exactly, not tenant-70
    assert 'name="group" value="tenant-7"' in page


def test_all_that_match_honours_the_group_key(operator: Client, data: ConsoleData) -> None:
    Job.objects.filter(pk__in=[j.id for j in data.available[:3]]).update(group_key="tenant-7")
    upto = max(j.id for j in data.available)

    asked = text_of(operator.post("/jobs/bulk/", matching_form("cancel", group="tenant-7")))
    response = operator.post(
        "/jobs/bulk/",
        {**matching_form("cancel", confirm=True, group="tenant-7"), "upto": str(upto)},
    )

    assert "Cancel 3 jobs?" in asked and "group key" in asked
    assert response.status_code == 302
    assert JobRecord.objects.filter(group_key="tenant-7", state="cancelled").count() == 3
    assert Job.objects.filter(queue="emails", state="available").count() == 3


def test_a_payload_filter_that_is_not_json_says_so(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/jobs/?payload=nope"))

    assert "The payload filter must be a JSON object" in page


def test_searching_for_a_job_id_opens_the_job(viewer: Client, data: ConsoleData) -> None:
    response = viewer.get(f"/jobs/?q=%23{data.running.id}")

    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{data.running.id}/"


def test_jobs_list_pages_by_id_newer_and_older(viewer: Client, db: None) -> None:
    ids = [
        Job.objects.create(kind="demo.send_email", queue="paging", payload={"to": "a@b.c"}).id
        for _ in range(120)
    ]

    first = text_of(viewer.get("/jobs/?queue=paging"))
    older = re.search(r'href="\?([^"]*before=\d+[^"]*)">Older', first)
    assert older is not None
    second = text_of(viewer.get("/jobs/?" + older.group(1).replace("&amp;", "&")))
    newer = re.search(r'href="\?([^"]*after=\d+[^"]*)">← Newer', second)
    assert newer is not None
    back = text_of(viewer.get("/jobs/?" + newer.group(1).replace("&amp;", "&")))

    def listed(page: str) -> list[int]:
        return [int(i) for i in re.findall(r'href="/jobs/(\d+)/">#', page)]

    assert listed(first) == sorted(ids, reverse=True)[:50]
    assert listed(second) == sorted(ids, reverse=True)[50:100]
    assert listed(back) == listed(first)


def test_htmx_filter_requests_get_only_the_results(viewer: Client, data: ConsoleData) -> None:
    response = viewer.get(
        "/jobs/?state=failed", headers={"HX-Request": "true", "HX-Target": "job-results"}
    )

    page = text_of(response)
    assert page.lstrip().startswith('<div id="job-results"')
    assert "<html" not in page


@pytest.mark.parametrize(
    "which", ["running", "scheduled", "blocked", "available", "succeeded", "dead", "cancelled"]
)
def test_job_page_renders_in_every_state(viewer: Client, data: ConsoleData, which: str) -> None:
    job = {
        "running": data.running,
        "scheduled": data.scheduled,
        "blocked": data.blocked,
        "available": data.available[0],
        "succeeded": data.succeeded[0],
        "dead": data.dead[-1],
        "cancelled": data.cancelled,
    }[which]
    assert job is not None

    response = viewer.get(f"/jobs/{job.id}/")

    page = text_of(response)
    assert response.status_code == 200
    assert f"#{job.id}" in page
    assert "Payload" in page


def test_job_page_shows_attempts_timings_progress_and_logs(
    viewer: Client, data: ConsoleData
) -> None:
    page = text_of(viewer.get(f"/jobs/{data.running.id}/"))

    assert "database went away" in page
    assert "Traceback (most recent call last)" in page
    assert "--p: 45%" in page and "batch 9 of 20" in page
    assert 'class="log-line stream-stdout stdout"' in page
    assert 'class="log-line stream-stderr stderr"' in page
    assert 'class="log-line stream-log log"' in page
    assert "Running for" in page


def test_dead_job_shows_every_attempt(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get(f"/jobs/{data.dead[-1].id}/"))

    assert page.count('class="attempt"') == 3
    assert "payment gateway timed out" in page


def test_missing_job_is_a_404(viewer: Client, db: None) -> None:
    assert viewer.get("/jobs/999999/").status_code == 404


def test_dead_letter_groups_by_queue_and_error_class(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/dead/"))

    assert re.search(r"CardDeclined.*?>3</a>", page, re.S)
    assert re.search(r"ConnectionError.*?>1</a>", page, re.S)


def test_workers_page_lists_hosts_and_heartbeats(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/workers/"))

    assert "web-1" in page and "web-2" in page
    assert "leader" in page
    assert "late" in page  # web-2 last beat 40 s ago


def test_audit_log_lists_actions(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/audit/"))

    assert "redrive" in page and "admin" in page


def test_the_audit_action_filter_offers_the_actions_recorded(
    viewer: Client, data: ConsoleData
) -> None:
    AuditEvent.objects.create(actor="ops", action="pause_queue", target_type="queue", target="x")

    page = text_of(viewer.get("/audit/?action=pause_queue"))
    options = re.findall(r'<option value="([^"]*)"( selected)?>', page.split('id="a-action"')[1])

    assert options[0] == ("", "")  # any action
    assert [value for value, _ in options[1:]] == ["pause_queue", "redrive", "schedule_create"]
    assert dict(options)["pause_queue"] == " selected"


def test_queue_page_shows_counts_and_config(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/queues/billing/"))

    assert "Configuration" in page and "Lock duration" in page
    assert "4</b> dead jobs" in page


def test_live_counts_of_a_table_too_large_to_count_are_marked_as_estimates(
    viewer: Client, data: ConsoleData
) -> None:
    jobs.noop.using(queue="big").enqueue_many([{}] * (reads.LIVE_SCAN + 1))

    queue_page = viewer.get("/queues/big/").content.decode()
    overview = viewer.get("/").content.decode()

    assert re.search(r'Available</div><div class="value"><abbr class="estimate"', queue_page)
    assert re.search(r'Available</div><a class="value" [^>]*><abbr class="estimate"', overview)
    small = viewer.get("/queues/billing/").content.decode()  # few available: still exact
    assert re.search(r'Available</div><div class="value">\d', small)


def test_oldest_waiting_job_is_found_whatever_its_priority(data: ConsoleData) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from queue_engine.reads import queue_stats

    now = timezone.now()
    for priority, minutes in ((50, 1), (0, 30), (-20, 5), (0, 2)):
        Job.objects.create(
            kind="tests.noop",
            queue="waits",
            priority=priority,
            run_at=now - timedelta(minutes=minutes),
        )

    (stats,) = queue_stats("waits")

    assert (
        stats.oldest_available
        == Job.objects.get(queue="waits", priority=0, run_at__lt=now - timedelta(minutes=20)).run_at
    )
    assert stats.latency is not None and stats.latency >= timedelta(minutes=30)


def test_schedules_page_shows_timing_and_next_fire(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/schedules/"))

    assert "nightly-report" in page
    assert '0 3 * * *</span> <span class="muted">Europe/Paris' in page
    assert "digest" in page and "every 15 min" in page


def test_schedules_can_be_disabled_enabled_and_run_now(operator: Client, data: ConsoleData) -> None:
    from queue_engine.models import Schedule

    operator.post("/schedules/action/", {"name": "digest", "action": "disable"})
    assert not Schedule.objects.get(name="digest").enabled
    operator.post("/schedules/action/", {"name": "digest", "action": "enable"})
    assert Schedule.objects.get(name="digest").enabled
    response = operator.post("/schedules/action/", {"name": "digest", "action": "run_now"})

    assert response.status_code == 302
    assert Job.objects.filter(kind="demo.send_email", payload__to="team@example.com").exists()


def test_unknown_queue_is_a_404(viewer: Client, db: None) -> None:
    assert viewer.get("/queues/nope/").status_code == 404


def test_viewers_see_no_action_buttons(viewer: Client, data: ConsoleData) -> None:
    for url in ["/jobs/", f"/jobs/{data.running.id}/", "/dead/", "/queues/billing/"]:
        page = text_of(viewer.get(url))
        assert 'name="action"' not in page
        assert "Redrive all" not in page


def test_operators_see_action_buttons(operator: Client, data: ConsoleData) -> None:
    assert 'value="retry"' in text_of(operator.get("/jobs/"))
    assert 'value="cancel"' in text_of(operator.get(f"/jobs/{data.running.id}/"))
    assert "Redrive all" in text_of(operator.get("/queues/billing/"))


# --- actions, roles, CSRF ---------------------------------------------------------------


def test_bulk_retry_confirmation_states_the_exact_count(
    operator: Client, data: ConsoleData
) -> None:
    assert data.scheduled is not None
    ids = [r.id for r in data.dead] + [data.running.id, data.scheduled.id]

    response = operator.post("/jobs/bulk/", {"action": "retry", "ids": ids})

    page = text_of(response)
    assert "Retry 5 jobs?" in page
    assert "<b>4</b> dead jobs will go back to their queue with fresh attempts" in page
    assert "<b>1</b> scheduled job will run now" in page
    assert (
        "<b>1</b> job will be left as it is: it is running or blocked, awaiting its parents" in page
    )
    assert not AuditEvent.objects.filter(action="retry").exists()  # nothing done yet


def test_confirmations_read_right_for_one_job_and_for_many(
    operator: Client, data: ConsoleData
) -> None:
    one_running = text_of(
        operator.post("/jobs/bulk/", {"action": "cancel", "ids": [data.running.id]})
    )
    one_dead = text_of(
        operator.post("/jobs/bulk/", {"action": "redrive", "ids": [data.dead[0].id]})
    )
    many_dead = text_of(
        operator.post("/jobs/bulk/", {"action": "redrive", "ids": [r.id for r in data.dead]})
    )

    assert "<b>1</b> running job will be told to stop; whatever it returns is discarded." in (
        one_running
    )
    assert "<b>1</b> dead job will go back to its queue with fresh attempts." in one_dead
    assert "dead jobs will go back to their queue with fresh attempts." in many_dead


def test_an_ended_job_page_is_not_live_and_a_running_one_is(
    viewer: Client, data: ConsoleData
) -> None:
    dead = text_of(viewer.get(f"/jobs/{data.dead[0].id}/"))
    running = text_of(viewer.get(f"/jobs/{data.running.id}/"))

    assert 'class="live-dot"' not in dead and "No output yet." not in dead
    assert 'class="live-dot"' in running


def test_every_action_wording_has_a_form_for_one_job_and_one_for_many() -> None:
    wordings = [w for effects in actions.EFFECTS.values() for w in effects.values()]
    wordings += list(actions.SKIPPED_BECAUSE.values())
    wordings += [actions.SUCCEEDED_FLOW_NODES, actions.ALREADY_STOPPING, actions.GONE]

    for one, many in wordings:
        assert not {"they", "their", "them", "are", "were"} & set(one.replace(";", " ").split())
        assert not {"it", "its"} & set(many.replace(";", " ").split())


def test_confirmed_bulk_retry_redrives_and_audits(operator: Client, data: ConsoleData) -> None:
    ids = [r.id for r in data.dead]

    response = operator.post(
        "/jobs/bulk/",
        {"action": "retry", "ids": ids, "confirm": "yes", "next": "/jobs/?state=failed"},
    )

    assert response.status_code == 302
    assert response["Location"] == "/jobs/?state=failed"
    assert set(Job.objects.filter(pk__in=ids).values_list("state", flat=True)) == {"available"}
    event = AuditEvent.objects.get(action="retry")
    assert (event.actor, event.count) == ("user-operator", 4)
    page = text_of(operator.get("/jobs/"))
    assert "4 jobs retried." in page


def test_a_running_job_asked_to_stop_says_so(operator: Client, data: ConsoleData) -> None:
    operator.post(
        "/jobs/bulk/", {"ids": str(data.running.id), "action": "cancel", "confirm": "yes"}
    )

    page = text_of(operator.get(f"/jobs/{data.running.id}/"))

    assert Job.objects.get(pk=data.running.id).state == "running"
    assert 'id="job-stopping"' in page and "its worker is stopping it" in page
    assert 'value="cancel"' not in page  # asked already: no second cancel offered


def test_bulk_cancel_and_remove(operator: Client, data: ConsoleData) -> None:
    waiting = [j.id for j in data.available[:3]]

    operator.post("/jobs/bulk/", {"action": "cancel", "ids": waiting, "confirm": "yes"})
    operator.post("/jobs/bulk/", {"action": "remove", "ids": waiting[:2], "confirm": "yes"})

    assert not Job.objects.filter(pk__in=waiting).exists()
    assert list(JobRecord.objects.filter(pk__in=waiting).values_list("state", flat=True)) == [
        "cancelled"
    ]


def test_bulk_action_that_changes_nothing_says_so(operator: Client, data: ConsoleData) -> None:
    page = text_of(operator.post("/jobs/bulk/", {"action": "redrive", "ids": [data.running.id]}))

    assert "Nothing to redrive" in page
    assert "not dead or cancelled" in page


def test_bulk_redirects_only_inside_the_site(operator: Client, data: ConsoleData) -> None:
    response = operator.post(
        "/jobs/bulk/",
        {
            "action": "redrive",
            "ids": [data.dead[0].id],
            "confirm": "yes",
            "next": "https://evil.example/",
        },
    )

    assert response["Location"] == "/jobs/"


ACTIONS = [
    ("/jobs/bulk/", lambda d: {"action": "retry", "ids": [d.dead[0].id], "confirm": "yes"}),
    ("/jobs/bulk/", lambda d: {"action": "cancel", "ids": [d.available[0].id], "confirm": "yes"}),
    ("/jobs/bulk/", lambda d: {"action": "remove", "ids": [d.succeeded[0].id], "confirm": "yes"}),
    ("/jobs/bulk/", lambda d: {"action": "redrive", "ids": [d.dead[0].id], "confirm": "yes"}),
    (
        "/dead/group/",
        lambda d: {
            "action": "redrive",
            "queue": "billing",
            "kind": "demo.charge_card",
            "error_class": "demo.CardDeclined",
            "upto": d.dead[-1].id,
            "confirm": "yes",
        },
    ),
    (
        "/dead/group/",
        lambda d: {
            "action": "remove",
            "queue": "billing",
            "kind": "demo.charge_card",
            "error_class": "demo.CardDeclined",
            "upto": d.dead[-1].id,
            "confirm": "yes",
        },
    ),
    ("/queues/billing/redrive/", lambda d: {"confirm": "yes"}),
    ("/schedules/action/", lambda d: {"name": "digest", "action": "disable"}),
    ("/schedules/action/", lambda d: {"name": "digest", "action": "run_now"}),
    ("/queues/emails/pause/", lambda d: {"confirm": "yes"}),
    ("/queues/emails/resume/", lambda d: {"confirm": "yes"}),
]


@pytest.mark.parametrize(("url", "form"), ACTIONS)
def test_viewers_cannot_act(make_user, data: ConsoleData, url: str, form) -> None:  # type: ignore[no-untyped-def]
    client = client_for(make_user("viewer"))

    response = client.post(url, form(data))

    assert response.status_code == 403
    assert "operator" in text_of(response)
    assert not AuditEvent.objects.filter(actor__startswith="user-").exists()


@pytest.mark.parametrize(("url", "form"), ACTIONS)
def test_operators_can_act(make_user, data: ConsoleData, url: str, form) -> None:  # type: ignore[no-untyped-def]
    client = client_for(make_user("operator"))
    if url.endswith("/resume/"):
        QueueConfig.objects.filter(name="emails").update(paused=True)

    response = client.post(url, form(data))

    assert response.status_code == 302
    assert AuditEvent.objects.filter(actor="user-operator").exists()


@pytest.mark.parametrize(("url", "form"), ACTIONS)
def test_actions_refuse_get(operator: Client, data: ConsoleData, url: str, form) -> None:  # type: ignore[no-untyped-def]
    response = operator.get(url, form(data))

    assert response.status_code == 405
    assert not AuditEvent.objects.filter(actor__startswith="user-").exists()


@pytest.mark.parametrize(("url", "form"), ACTIONS)
def test_actions_without_csrf_token_are_refused(
    make_user, data: ConsoleData, url: str, form
) -> None:  # type: ignore[no-untyped-def]
    client = client_for(make_user("operator"), enforce_csrf_checks=True)

    response = client.post(url, form(data))

    assert response.status_code == 403
    assert "CSRF" in text_of(response)
    assert not AuditEvent.objects.filter(actor__startswith="user-").exists()


def test_actions_with_the_csrf_token_go_through(make_user, data: ConsoleData) -> None:
    client = client_for(make_user("operator"), enforce_csrf_checks=True)
    page = text_of(client.get("/jobs/"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None

    response = client.post(
        "/jobs/bulk/",
        {
            "action": "redrive",
            "ids": [data.dead[0].id],
            "confirm": "yes",
            "csrfmiddlewaretoken": token.group(1),
        },
    )

    assert response.status_code == 302
    assert Job.objects.filter(pk=data.dead[0].id).exists()


def test_dead_group_confirmation_counts_the_group(operator: Client, data: ConsoleData) -> None:
    page = text_of(
        operator.post(
            "/dead/group/",
            {
                "action": "redrive",
                "queue": "billing",
                "kind": "demo.charge_card",
                "error_class": "demo.CardDeclined",
                "upto": data.dead[-1].id,
            },
        )
    )

    assert "Redrive 3 dead jobs?" in page


def test_dead_group_redrive_moves_only_that_group(operator: Client, data: ConsoleData) -> None:
    operator.post(
        "/dead/group/",
        {
            "action": "redrive",
            "queue": "billing",
            "kind": "demo.charge_card",
            "error_class": "demo.CardDeclined",
            "upto": data.dead[-1].id,
            "confirm": "yes",
        },
    )

    assert Job.objects.filter(pk__in=[r.id for r in data.dead[:3]]).count() == 3
    assert JobRecord.objects.filter(pk=data.dead[3].id, state="failed").exists()


def test_queue_redrive_all_confirms_then_redrives(operator: Client, data: ConsoleData) -> None:
    page = text_of(operator.post("/queues/billing/redrive/"))
    assert "Redrive 4 dead jobs of billing?" in page

    operator.post("/queues/billing/redrive/", {"confirm": "yes"})

    assert not JobRecord.objects.filter(queue="billing", state="failed").exists()
    assert AuditEvent.objects.filter(action="redrive_queue", target="billing").exists()


def test_pause_and_resume_a_queue_ask_first_as_a_kind_does(
    operator: Client, data: ConsoleData
) -> None:
    asked = text_of(operator.post("/queues/emails/pause/"))
    unchanged = QueueConfig.objects.get(name="emails").paused
    audited = AuditEvent.objects.filter(action="pause_queue").exists()
    operator.post("/queues/emails/pause/", {"confirm": "yes"})
    paused = QueueConfig.objects.get(name="emails").paused
    page = text_of(operator.get("/queues/emails/"))
    asked_resume = text_of(operator.post("/queues/emails/resume/"))
    still_paused = QueueConfig.objects.get(name="emails").paused
    operator.post("/queues/emails/resume/", {"confirm": "yes"})

    assert 'Pause queue <span class="mono">emails</span>?' in asked
    assert "Its <b>6</b> waiting jobs stay queued" in asked
    assert not unchanged and not audited
    assert paused and "Resume…" in page
    assert "Workers take its jobs again at once: <b>6</b> jobs wait." in asked_resume
    assert still_paused
    assert not QueueConfig.objects.get(name="emails").paused


def test_the_queue_page_crumb_leads_to_the_queues(viewer: Client, data: ConsoleData) -> None:
    page = text_of(viewer.get("/queues/emails/"))

    assert '<div class="crumbs"><a href="/queues/">Queues</a> / emails</div>' in page


def matching_form(action: str, confirm: bool = False, **filters: str) -> dict[str, str]:
    form = {"action": action, "scope": "matching"}
    form.update({f"match_{k}": v for k, v in filters.items()})
    if confirm:
        form["confirm"] = "yes"
    return form


def test_all_that_match_confirmation_counts_every_matching_job(
    operator: Client, data: ConsoleData
) -> None:
    page = text_of(operator.post("/jobs/bulk/", matching_form("cancel", queue="emails")))

    assert "Cancel 7 jobs?" in page  # 6 available and 1 scheduled; 4 succeeded are skipped
    assert "<b>6</b> available jobs will stop waiting" in page
    assert "<b>4</b> jobs will be left as they are: they have already ended" in page
    assert not AuditEvent.objects.filter(actor__startswith="user-").exists()


def test_all_that_match_runs_in_the_request_when_small(operator: Client, data: ConsoleData) -> None:
    upto = max(j.id for j in data.available)

    response = operator.post(
        "/jobs/bulk/",
        {
            **matching_form("cancel", confirm=True, queue="emails", state="available"),
            "upto": str(upto),
        },
    )

    assert response.status_code == 302
    assert not Job.objects.filter(queue="emails", state="available").exists()
    assert JobRecord.objects.filter(queue="emails", state="cancelled").count() == 6


def test_all_that_match_leaves_out_jobs_newer_than_the_count(
    operator: Client, data: ConsoleData
) -> None:
    upto = max(j.id for j in data.available)
    late = Job.objects.create(kind="demo.send_email", queue="emails", payload={"to": "x@y.z"})

    operator.post(
        "/jobs/bulk/",
        {
            **matching_form("cancel", confirm=True, queue="emails", state="available"),
            "upto": str(upto),
        },
    )

    assert Job.objects.filter(pk=late.id, state="available").exists()


def test_all_that_match_runs_as_a_job_when_large(
    operator: Client, data: ConsoleData, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queue_engine.console import matching

    monkeypatch.setattr(matching, "SYNC_LIMIT", 2)

    response = operator.post(
        "/jobs/bulk/", matching_form("cancel", confirm=True, queue="emails", state="available")
    )

    bulk = Job.objects.get(kind="queue_engine.console.matching.run_bulk")
    assert response["Location"] == f"/jobs/{bulk.id}/"
    assert bulk.payload["total"] == 6 and bulk.payload["actor"] == "user-operator"
    assert Job.objects.filter(queue="emails", state="available").count() == 6  # not yet


def test_the_bulk_job_works_in_batches_and_reports_progress(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queue_engine.console import matching

    ids = [
        Job.objects.create(kind="demo.send_email", queue="big", payload={"to": "a@b.c"}).id
        for _ in range(5)
    ]
    reported = []

    class Ctx:
        def progress(self, fraction: float, message: str = "") -> None:
            reported.append((fraction, message))

    monkeypatch.setattr(matching, "BATCH", 2)

    result = matching.run_bulk.func(
        Ctx(), action="cancel", filters={"queue": "big"}, upto=max(ids), total=5, actor="ops-team"
    )

    assert result == {"done": 5, "confirmed": 5}
    assert [m for _, m in reported] == ["2 of 5 cancelled", "4 of 5 cancelled", "5 of 5 cancelled"]
    assert AuditEvent.objects.filter(actor="ops-team", action="cancel").count() == 3


# --- escaping and masking ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["emails/config", "a/pause", "x~s/y~", "~", "plain"])
def test_any_queue_name_has_its_own_page_and_actions(operator: Client, name: str) -> None:
    jobs.noop.using(queue=name).enqueue()
    page_url = reverse("queue_engine:queue", args=[name])
    pause_url = reverse("queue_engine:queue_pause", args=[name])

    assert page_url.count("/") == 3  # /queues/<one segment>/
    page = text_of(operator.get(page_url))
    assert f"<title>Queue {escape(name)}" in page
    operator.post(pause_url, {"confirm": "yes"})

    assert QueueConfig.objects.get(name=name).paused
    assert operator.get("/queues/bad~x/").status_code == 404  # not an escape a name makes


def test_attacker_strings_come_out_escaped_everywhere(viewer: Client, db: None) -> None:
    data = console_data.seed(xss=True)
    evil_queue = Job.objects.get(name=XSS)
    urls = [
        "/",
        "/jobs/",
        f"/jobs/{data.running.id}/",
        f"/jobs/{data.dead[-1].id}/",
        f"/jobs/{evil_queue.id}/",
        "/dead/",
        reverse("queue_engine:queue", args=[XSS]),
    ]

    for url in urls:
        response = viewer.get(url)
        page = text_of(response)
        assert response.status_code == 200, url
        assert "<script>alert" not in page, url
        assert "<img src=x" not in page, url
        assert "&lt;script&gt;alert" in page, url


def test_secret_looking_keys_are_masked(viewer: Client, data: ConsoleData) -> None:
    running = text_of(viewer.get(f"/jobs/{data.running.id}/"))
    succeeded = text_of(viewer.get(f"/jobs/{data.succeeded[0].id}/"))
    waiting = text_of(viewer.get(f"/jobs/{data.available[0].id}/"))

    assert "hunter2" not in running and "Bearer abc" not in running
    assert "&quot;db_password&quot;: &quot;********&quot;" in running
    assert "&quot;region&quot;: &quot;eu&quot;" in running
    assert "s3cr3t" not in succeeded
    assert "tok_live_SECRET1234" not in waiting


def test_masked_keys_are_configurable(viewer: Client, data: ConsoleData, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "CONSOLE_MASKED_KEYS": ["region"]}

    page = text_of(viewer.get(f"/jobs/{data.running.id}/"))

    assert "hunter2" in page
    assert "&quot;region&quot;: &quot;********&quot;" in page


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_the_bulk_job(operator: Client, workers, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from queue_engine.console import matching

    monkeypatch.setattr(matching, "SYNC_LIMIT", 2)
    waiting = [Job.objects.create(kind="tests.noop", queue="held").id for _ in range(5)]
    QueueConfig.objects.filter(name="held").update(paused=True)  # the noop jobs stay put
    operator.post("/jobs/bulk/", matching_form("cancel", confirm=True, queue="held"))
    bulk = Job.objects.get(kind="queue_engine.console.matching.run_bulk")

    workers.start()

    record = wait_for(
        lambda: JobRecord.objects.filter(pk=bulk.id).first(),
        timeout=40,
        message="the bulk job to end",
    )
    assert (record.state, record.result) == ("succeeded", {"done": 5, "confirmed": 5})
    assert set(JobRecord.objects.filter(pk__in=waiting).values_list("state", flat=True)) == {
        "cancelled"
    }


@pytest.mark.django_db(transaction=True)
def test_a_page_past_the_statement_timeout_asks_to_narrow_it(
    viewer: Client, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from django.db import connection

    def slow_workers():  # type: ignore[no-untyped-def]
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(2)")
        return []

    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "CONSOLE_STATEMENT_TIMEOUT": 0.2}
    monkeypatch.setattr(reads, "workers", slow_workers)

    response = viewer.get("/workers/")

    assert response.status_code == 503
    assert "This page took too long" in text_of(response)
    assert "Narrow what you asked for" in text_of(response)
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0", "the connection gets its default back"


def test_console_pages_run_under_the_statement_timeout(viewer: Client, db: None) -> None:
    from django.db import connection

    seen = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if "queue_engine_workerprocess" in sql:  # the page's own queries
            with connection.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                timeout = cursor.fetchone()[0]
                cursor.execute("SHOW jit")
                seen.append((timeout, cursor.fetchone()[0]))
        return execute(sql, params, many, context)

    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        default_jit = cursor.fetchone()[0]
    with connection.execute_wrapper(record):
        viewer.get("/workers/")

    # JIT off too: compiling a plan a big table's estimates call expensive takes longer
    # than a console query runs.
    assert seen and set(seen) == {("3s", "off")}
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == default_jit, "the connection gets its default back"


def test_djangos_default_login_path_leads_to_the_console_login(client: Client) -> None:
    response = client.get("/accounts/login/?next=/jobs/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/jobs/"


def test_a_missing_job_gets_the_consoles_not_found_page(viewer: Client) -> None:
    response = viewer.get("/jobs/999999999/")

    page = text_of(response)
    assert response.status_code == 404
    assert "Job 999999999 does not exist" in page
    assert 'class="topbar"' in page and "Look for it from the lists" in page


def test_an_unknown_path_gets_the_consoles_not_found_page(viewer: Client) -> None:
    response = viewer.get("/no-such-page/")

    page = text_of(response)
    assert response.status_code == 404
    assert "There is no page at" in page and "/no-such-page/" in page
    assert 'class="topbar"' in page


def test_the_error_pages_render_without_a_request() -> None:
    for name, words in [
        ("500.html", "Something went wrong on our side"),
        ("403_csrf.html", "This form has expired"),
        ("403.html", "You cannot do this"),
    ]:
        assert words in render_to_string(name)


def test_a_post_without_its_csrf_token_gets_the_consoles_expired_form_page(
    make_user: Any,
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("operator"))

    response = client.post("/jobs/bulk/", {"action": "retry", "ids": ["1"]})

    assert response.status_code == 403
    assert "This form has expired" in text_of(response)


def test_the_state_filter_says_dead_as_the_badges_do_and_takes_either_word(
    viewer: Client, data: ConsoleData
) -> None:
    page = text_of(viewer.get("/jobs/"))
    by_word = text_of(viewer.get("/jobs/?state=dead"))
    by_value = text_of(viewer.get("/jobs/?state=failed"))
    by_oban_word = text_of(viewer.get("/jobs/?state=discarded"))

    tabs = page.split('id="job-tabs"')[1].split("</nav>")[0]
    current = by_word.split('aria-current="page"')[-1].split(">")[1].split("<span")[0]
    assert "Dead" in tabs and "Blocked" in tabs
    assert "Failed" not in tabs and "Waiting" not in tabs
    assert current.strip() == "Dead"
    assert by_oban_word.count('id="job-row-') == by_value.count('id="job-row-')
    assert f'id="job-row-{data.dead[0].id}"' in by_word
    assert by_word.count('id="job-row-') == by_value.count('id="job-row-') > 0


def test_schedules_show_their_last_fires_with_links_to_the_jobs(
    viewer: Client, data: ConsoleData
) -> None:
    from queue_engine import ops

    ended = console_data.record(
        "failed",
        kind="demo.send_email",
        meta={"schedule": "digest", "fire_time": "2026-01-02T03:04:05+00:00"},
    )
    live = ops.run_schedule_now("digest")  # waiting
    other = console_data.record("succeeded", kind="demo.send_email", meta={"schedule": "x"})

    page = text_of(viewer.get("/schedules/"))
    row = page.split('<span class="name">digest</span>', 1)[1].split("</tr>", 1)[0]
    links = re.findall(r'<a href="/jobs/(\d+)/" title="Job #\d+: ([^",]+)', row)

    assert [int(job_id) for job_id, _ in links] == [live.id, ended.id]  # newest first
    assert dict(links)[str(ended.id)] == "dead"
    assert "fired for 2026-01-02 03:04:05" in row
    assert f"/jobs/{other.id}/" not in row
