"""A dead-letter group drills down to exactly its jobs: the jobs list's error class, error
message and worker filters, the dead letter's kind column, the group actions' audit rows."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.db import connection
from django.test import Client

from queue_engine.models import AuditEvent, JobRecord
from tests.support import console_data
from tests.support.console_data import ConsoleData

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(db: None) -> ConsoleData:
    seeded = console_data.seed()
    # The same error in the same queue from another kind: a group of its own.
    seeded.dead.append(
        console_data.record(
            "failed",
            queue="billing",
            kind="demo.refund",
            errors=[console_data.error(1, "demo.CardDeclined", "refund to a closed card")],
            worker="web-2:77",
        )
    )
    return seeded


def listed(response) -> set[int]:  # type: ignore[no-untyped-def]
    return {int(i) for i in re.findall(r'id="job-row-(\d+)"', response.content.decode())}


def group_links(page: str) -> dict[str, str]:
    """The dead letter's count links, by the group's kind and error class."""
    links = {}
    for row in page.split("<tr>")[1:]:
        kind = re.search(r'<td class="mono kind-cell">([^<]*)</td>', row)
        link = re.search(r'<td class="count-cell"><a href="([^"]+)"', row)
        error = re.search(r'<span class="mono" title="([^"]*)"', row)
        if kind and link and error:
            links[f"{kind.group(1)} {error.group(1)}"] = unescape(link.group(1))
    return links


def test_each_dead_group_count_links_to_exactly_its_jobs(viewer: Client, data: ConsoleData) -> None:
    links = group_links(viewer.get("/dead/").content.decode())

    declined = listed(viewer.get(links["demo.charge_card demo.CardDeclined"]))
    timed_out = listed(viewer.get(links["demo.charge_card builtins.ConnectionError"]))
    refunds = listed(viewer.get(links["demo.refund demo.CardDeclined"]))

    assert declined == {r.id for r in data.dead[:3]}
    assert timed_out == {data.dead[3].id}
    assert refunds == {data.dead[4].id}


def test_the_dead_letter_shows_each_groups_kind(viewer: Client, data: ConsoleData) -> None:
    page = viewer.get("/dead/").content.decode()

    head = page.split("<thead>")[1].split("</thead>")[0]
    assert "<th>Kind</th>" in head
    assert set(re.findall(r'<td class="mono kind-cell">([^<]*)</td>', page)) == {
        "demo.charge_card",
        "demo.refund",
    }


def test_jobs_filter_by_last_error_message_text(viewer: Client, data: ConsoleData) -> None:
    found = listed(viewer.get("/jobs/?message=GATEWAY+timed"))

    assert found == {data.dead[3].id}


def test_jobs_filter_by_last_error_class_in_any_state(viewer: Client, data: ConsoleData) -> None:
    found = listed(viewer.get("/jobs/?error_class=builtins.ConnectionError"))

    # The dead job, and the running one whose first attempt failed the same way.
    assert found == {data.dead[3].id, data.running.id}


def test_jobs_filter_by_worker_id_or_host(viewer: Client, data: ConsoleData) -> None:
    by_id = listed(viewer.get("/jobs/?worker=web-2:77"))
    by_host = listed(viewer.get("/jobs/?worker=web-2"))
    by_prefix_only = listed(viewer.get("/jobs/?worker=web"))

    assert by_id == by_host == {data.dead[4].id}
    assert by_prefix_only == set()


def test_a_job_with_no_error_is_found_by_the_none_class(viewer: Client, data: ConsoleData) -> None:
    silent = console_data.record("failed", queue="billing", kind="demo.refund", errors=[])

    found = listed(viewer.get("/jobs/?queue=billing&state=failed&error_class=(none)"))

    assert found == {silent.id}


def test_all_that_match_acts_only_on_the_group(operator: Client, data: ConsoleData) -> None:
    form = {
        "action": "remove",
        "scope": "matching",
        "match_queue": "billing",
        "match_state": "failed",
        "match_error_class": "demo.CardDeclined",
        "match_kind": "demo.charge_card",
        "confirm": "yes",
    }

    operator.post("/jobs/bulk/", form)

    left = set(JobRecord.objects.filter(state="failed").values_list("id", flat=True))
    assert left == {data.dead[3].id, data.dead[4].id}


def test_a_group_redrive_is_audited_as_its_group_and_count(
    operator: Client, data: ConsoleData
) -> None:
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
    audit = operator.get("/audit/").content.decode()

    event = AuditEvent.objects.get(action="redrive_group")
    assert (event.action, event.target_type, event.count) == ("redrive_group", "dead group", 3)
    assert event.target == "billing · demo.charge_card · demo.CardDeclined"
    rows = audit.split("<tbody", 1)[1].split("</tr>")  # past the action filter's options
    row = next(r for r in rows if "redrive_group" in r)
    assert "dead group: queue" in row and "CardDeclined" in row and "demo.charge_card" in row
    assert '<td class="count-cell">3</td>' in row
    assert "job #" not in row


def test_the_group_filter_reads_the_dead_error_index(data: ConsoleData) -> None:
    from queue_engine import sql
    from queue_engine.reads.jobs import JobFilter

    where = JobFilter(queue="billing", state="failed", error_class="demo.CardDeclined")
    params = {**where.params(), "before": None, "floor": None, "limit": 51}
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a table this small is read whole
        cursor.execute("EXPLAIN " + sql.HISTORY_OLDER, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    # Each leaf's copy of qe_rec_dead_error, named by Postgres after its columns.
    assert "queue_coalesce_id_idx" in plan
    assert "Index Cond: (((queue)::text = 'billing'::text) AND (COALESCE" in plan
