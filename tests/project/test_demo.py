"""`make run`'s demo: load_demo twice, a real worker, and what a newcomer then sees."""

from __future__ import annotations

from collections import Counter
from io import StringIO
from itertools import chain

import pytest
from django.core.management import call_command
from django.db.models import Model, QuerySet

from jobsite import demo
from queue_engine import ops
from queue_engine.models import AuditEvent, FlowEdge, FlowRun, Job, JobLog, JobRecord, Schedule
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def load_demo() -> str:
    out = StringIO()
    call_command("load_demo", seconds_per_row=0.02, stdout=out)
    return out.getvalue()


def eventually[M: Model](rows: QuerySet[M]) -> M:
    """The first of these rows, once there is one (the worker is running)."""
    found: M = wait_for(rows.first, timeout=20, message=f"a row matching {rows.query}")
    return found


def flow_named(name: str, state: str) -> FlowRun:
    return eventually(FlowRun.objects.filter(name=name, state=state))


def demo_record(dedup_key: str, state: str) -> JobRecord:
    return eventually(JobRecord.objects.filter(dedup_key=dedup_key, state=state))


def nodes(flow: FlowRun) -> dict[str, JobRecord]:
    return {str(r.node_key): r for r in JobRecord.objects.filter(flow_id=flow.pk)}


def test_load_demo_twice_then_a_worker_fills_every_page(workers: Workers) -> None:
    first, second = load_demo(), load_demo()
    run_now = {name: ops.run_schedule_now(name).id for name in demo.SCHEDULE_NAMES}
    workers.start("--concurrency", "8")

    catalogue = flow_named("Catalogue import: spring range", "succeeded")
    invoicing = flow_named("Nightly invoicing", "failed")
    declined = demo_record("demo:charge:1003", "failed")
    gateway_down = demo_record("demo:charge:1007", "failed")
    report = demo_record("demo:report", "succeeded")
    wait_for(
        lambda: JobRecord.objects.filter(id__in=run_now.values(), state="succeeded").count() == 4,
        timeout=20,
        message="each schedule's run-now job to succeed",
    )
    flow_named(f"Catalogue import: drop {run_now_fire_time(run_now)}", "succeeded")

    assert "4 schedules, 17 jobs and 2 flows seeded" in first
    assert "already seeded" in second
    seeded = Counter(
        key
        for key in chain(
            Job.objects.filter(dedup_key__startswith="demo:").values_list("dedup_key", flat=True),
            JobRecord.objects.filter(dedup_key__startswith="demo:").values_list(
                "dedup_key", flat=True
            ),
        )
    )
    assert len(seeded) == 17 and set(seeded.values()) == {1}
    assert FlowRun.objects.filter(name__in=[catalogue.name, invoicing.name]).count() == 2
    assert sorted(Schedule.objects.filter(enabled=True).values_list("name", flat=True)) == sorted(
        demo.SCHEDULE_NAMES
    )
    assert Schedule.objects.count() == 4
    audited = AuditEvent.objects.filter(target_type="schedule", target__in=demo.SCHEDULE_NAMES)
    assert Counter(audited.values_list("action", flat=True)) == {
        "schedule_create": 4,
        "schedule_run_now": 4,
    }

    done = nodes(catalogue)
    counts = [dict(r.result or {}) for r in done.values() if r.kind == "demo.count_shelf"]
    assert len(counts) == 3
    assert FlowEdge.objects.filter(flow_id=catalogue.pk, dynamic=True).count() == 3
    assert done["publish"].result == {
        "catalogue": "spring range",
        "image_ids": [0, 1, 2, 3],
        "renditions": 12,
        "shelves_counted": 3,
        "items_in_stock": sum(c["items"] for c in counts),
    }

    ended = nodes(invoicing)
    assert ended["invoice[1]"].state == "failed"
    assert ended["invoice[1]"].errors[-1]["class"] == "jobsite.demo_jobs.MissingBillingAddress"
    assert ended["invoice[0]"].state == ended["invoice[2]"].state == "succeeded"
    assert Job.objects.get(flow_id=invoicing.pk, node_key="email").state == "upstream_failed"

    assert declined.attempt == 1
    assert declined.errors[-1]["class"] == "jobsite.demo_jobs.CardDeclined"
    assert gateway_down.attempt == 3
    assert [e["class"] for e in gateway_down.errors] == ["builtins.ConnectionError"] * 3
    paid = JobRecord.objects.get(dedup_key="demo:charge:1005")
    assert (paid.state, paid.attempt, len(paid.errors)) == ("succeeded", 2, 1)
    assert Job.objects.get(dedup_key="demo:reminder").state == "scheduled"

    lines = list(JobLog.objects.filter(job_id=report.pk).order_by("seq"))
    stdout = [line.text for line in lines if line.stream == "stdout"]
    assert stdout == [f"processed batch {i} of 30" for i in range(1, 31)]
    assert {line.stream for line in lines} == {"stdout", "stderr", "log"}

    newsletter_emails = JobRecord.objects.filter(
        kind="demo.send_email", payload__subject__startswith="News"
    )
    assert newsletter_emails.count() >= 5
    # The checkout's charges: some end at once, some are still waiting out a retry's back-off
    # (1 in 10 order numbers fails once, 1 in 10 for good), so count live and finished rows,
    # live first: a charge that ends between the two counts is counted twice, never missed.
    charges = (
        Job.objects.filter(kind="demo.charge_card", dedup_key=None).count()
        + JobRecord.objects.filter(kind="demo.charge_card", dedup_key=None).count()
    )
    assert charges >= 3


def run_now_fire_time(run_now: dict[str, int]) -> str:
    """HH:MM of the catalogue schedule's run-now fire, which names the flow it starts."""
    job = JobRecord.objects.get(pk=run_now["demo-catalogue-import"])
    return str(job.payload["fired_at"])[11:16]
