"""The Kinds page and the kill switch in the console: what it lists, the confirmation
that says what a pause does, the audit, the overview's notice and the metrics gauge."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from queue_engine import ops
from queue_engine.models import AuditEvent, JobRecord, KindControl
from tests.support import kind_jobs
from tests.support.metrics import samples, scrape

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_kinds_page_lists_kinds_with_their_waiting_and_dead_jobs(viewer: Client) -> None:
    kind_jobs.paused_kind.enqueue_many([{"n": i} for i in range(3)])
    kind_jobs.other_kind.enqueue(n=1)
    JobRecord.objects.create(id=777, kind="retired.kind", queue="old-queue", state="failed")

    page = viewer.get("/kinds/").content.decode()

    assert "tests.switch.paused" in page and "tests.switch.other" in page
    assert 'href="/jobs/?kind=tests.switch.paused&amp;state=available">3</a>' in page
    # A kind no process registers any more shows with its dead jobs and their queue.
    assert 'href="/jobs/?kind=retired.kind&amp;state=dead">1</a>' in page
    assert 'href="/queues/old-queue/">old-queue</a>' in page
    assert 'name="action"' not in page  # viewers see no kill switch


def test_pausing_a_kind_confirms_first_then_pauses_audits_and_shows_everywhere(
    operator: Client,
    metrics_on: None,
) -> None:
    kind_jobs.paused_kind.enqueue_many([{"n": i} for i in range(3)])

    confirm = operator.post("/kinds/action/", {"kind": "tests.switch.paused", "action": "pause"})
    text = confirm.content.decode()
    assert 'Pause kind <span class="mono">tests.switch.paused</span>?' in text
    assert "Its <b>3</b> waiting jobs stay queued" in text
    assert not KindControl.objects.exists()  # nothing done before the confirmation

    done = operator.post(
        "/kinds/action/",
        {"kind": "tests.switch.paused", "action": "pause", "confirm": "yes"},
        follow=True,
    )
    assert "Kind tests.switch.paused paused" in done.content.decode()
    assert ops.paused_kinds() == ["tests.switch.paused"]
    event = AuditEvent.objects.get(action="pause_kind")
    assert (event.actor, event.target_type, event.target) == (
        "user-operator",
        "kind",
        "tests.switch.paused",
    )

    kinds_page = operator.get("/kinds/").content.decode()
    assert 'value="resume"' in kinds_page and "by user-operator" in kinds_page
    overview = operator.get("/").content.decode()
    assert 'id="paused-kinds"' in overview and "tests.switch.paused" in overview
    gauges = samples(scrape())
    assert gauges[("queue_engine_kind_paused", (("kind", "tests.switch.paused"),))] == 1

    operator.post(
        "/kinds/action/", {"kind": "tests.switch.paused", "action": "resume", "confirm": "yes"}
    )
    assert ops.paused_kinds() == []
    assert 'id="paused-kinds"' not in operator.get("/").content.decode()


def test_a_kind_action_refuses_bad_input_and_viewers(viewer: Client, operator: Client) -> None:
    assert (
        viewer.post(
            "/kinds/action/", {"kind": "tests.switch.paused", "action": "pause"}
        ).status_code
        == 403
    )
    bad: Any = operator.post(
        "/kinds/action/", {"kind": "nope.nothing", "action": "pause"}, follow=True
    )
    assert "No kind &#x27;nope.nothing&#x27; is known" in bad.content.decode()
    bad = operator.post(
        "/kinds/action/", {"kind": "tests.switch.paused", "action": "explode"}, follow=True
    )
    assert "Unknown action" in bad.content.decode()
    assert not KindControl.objects.exists() and not AuditEvent.objects.exists()


def test_the_engines_own_kinds_are_marked_internal_and_offer_no_pause(operator: Client) -> None:
    engine_kind = "queue_engine.console.matching.run_bulk"
    kind_jobs.other_kind.enqueue(n=1)

    page = operator.get("/kinds/").content.decode()
    row = page.split(f">{engine_kind}</a>", 1)[1].split("</tr>", 1)[0]
    other = page.split(">tests.switch.other</a>", 1)[1].split("</tr>", 1)[0]
    refused = operator.post(
        "/kinds/action/", {"kind": engine_kind, "action": "pause", "confirm": "yes"}, follow=True
    )

    assert ">internal</span>" in row and 'value="pause"' not in row
    assert ">internal</span>" not in other and 'value="pause"' in other
    assert (
        f"Cannot pause kind &#x27;{engine_kind}&#x27;: it is the engine&#x27;s own"
        in refused.content.decode()
    )
    assert not KindControl.objects.exists()
    assert not AuditEvent.objects.filter(action="pause_kind").exists()
