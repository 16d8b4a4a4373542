"""A flow's timeline: waiting, queued and running per node, failed attempts, critical path."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queue_engine import reads
from queue_engine.flows import Flow
from queue_engine.models import FlowRun, Job
from tests.support import jobs
from tests.support.flow_nodes import end_node

pytestmark = pytest.mark.django_db(transaction=True)


def end(
    flow_id: int, key: str, started: datetime, finished: datetime, errors: list[datetime]
) -> None:
    """End one node as a settle would, with these times, after these failed attempts."""
    failed = [
        {"attempt": n, "class": "IOError", "message": "bank down", "at": at.isoformat()}
        for n, at in enumerate(errors, start=1)
    ]
    end_node(flow_id, key, "succeeded", errors=failed, started=started, finished=finished)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def test_the_timeline_splits_each_node_and_marks_the_chain_that_decided_the_flow() -> None:
    flow = Flow("payouts")
    flow.add("extract", jobs.number, value=1)
    flow.add("fast", jobs.number, value=2, depends_on=["extract"])
    flow.add("slow", jobs.number, value=3, depends_on=["extract"])
    flow.add("load", jobs.sum_outputs, depends_on=["fast", "slow"])
    flow_id = flow.submit()
    t0 = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(flow_id=flow_id).update(created_at=t0, run_at=t0)
    FlowRun.objects.filter(pk=flow_id).update(created_at=t0)
    end(flow_id, "extract", t0 + seconds(1), t0 + seconds(2), [])
    end(flow_id, "fast", t0 + seconds(3), t0 + seconds(4), [])
    end(flow_id, "slow", t0 + seconds(6), t0 + seconds(10), [t0 + seconds(4)])
    end(flow_id, "load", t0 + seconds(11), t0 + seconds(12), [])
    FlowRun.objects.filter(pk=flow_id).update(finished_at=t0 + seconds(12))

    graph = reads.flow_graph(flow_id)
    assert graph is not None
    timeline = reads.flow_timeline(graph)
    rows = {row.node.key: row for row in timeline.rows}
    load = {span.what: (span.start - t0, span.took) for span in rows["load"].spans}

    assert {key for key, row in rows.items() if row.critical} == {"extract", "slow", "load"}
    assert timeline.critical == 3 and timeline.took == seconds(12)
    assert load == {
        "waiting": (seconds(0), seconds(10)),  # until its last parent (slow) ended
        "queued": (seconds(10), seconds(1)),
        "running": (seconds(11), seconds(1)),
    }
    assert [(f.attempt, f.at) for f in rows["slow"].failures] == [(1, t0 + seconds(4))]
    assert rows["slow"].failures[0].left == pytest.approx(4 / 12 * 100)
    assert [s.what for s in rows["extract"].spans] == ["queued", "running"]


def test_a_running_flow_s_timeline_runs_to_now_and_is_on_its_page(
    make_user: object,
) -> None:
    from tests.support.console_users import client_for

    flow = Flow("nightly")
    flow.add("first", jobs.number, value=1)
    flow.add("second", jobs.number, value=2, depends_on=["first"])
    flow_id = flow.submit()
    viewer: Client = client_for(make_user("viewer"))  # type: ignore[operator]

    page = viewer.get(f"/flows/{flow_id}/").content.decode()
    graph = reads.flow_graph(flow_id)
    assert graph is not None
    timeline = reads.flow_timeline(graph)
    second = next(row for row in timeline.rows if row.node.key == "second")

    assert 'id="flow-timeline"' in page and "so far" in page
    assert [s.what for s in second.spans] == ["waiting"]  # its parent has not run
    assert timeline.critical == 0  # nothing has ended yet
    assert "second: blocked, waiting" in page  # its state, then its span: waiting for parents


def test_a_large_flow_s_timeline_lists_more_nodes_than_its_graph_draws(
    make_user: object,
) -> None:
    from tests.support.console_users import client_for

    flow = Flow("wide")
    flow.add("root", jobs.number, value=1)
    flow.fan_out("part", jobs.number, [{"value": i} for i in range(699)], depends_on=["root"])
    flow_id = flow.submit()
    viewer: Client = client_for(make_user("viewer"))  # type: ignore[operator]

    page = viewer.get(f"/flows/{flow_id}/").content.decode()
    timeline = page.split('id="flow-timeline"')[1].split("</section>")[0]

    drawn = json.loads(
        page.split('id="flow-data" type="application/json">')[1].split("</script>")[0]
    )

    assert reads.MAX_FLOW_NODES == 500
    assert timeline.count('class="tl-row') == 700
    assert len(drawn["nodes"]) == 500  # the graph draws the lowest ids, from the same read
    assert {n["key"] for n in drawn["nodes"]} >= {"root"}
    assert all(p in {n["id"] for n in drawn["nodes"]} for p, _c, _d in drawn["edges"])
    assert "The timeline shows the first" not in timeline


def test_a_failed_flow_s_critical_path_ends_at_the_node_that_failed() -> None:
    flow = Flow("payouts")
    flow.add("extract", jobs.number, value=1)
    flow.add("bad", jobs.number, value=2, depends_on=["extract"])
    flow.add("other", jobs.number, value=3, depends_on=["extract"])
    flow.add("load", jobs.sum_outputs, depends_on=["bad", "other"])
    flow_id = flow.submit()
    t0 = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(flow_id=flow_id).update(created_at=t0, run_at=t0)
    FlowRun.objects.filter(pk=flow_id).update(created_at=t0)
    end(flow_id, "extract", t0 + seconds(1), t0 + seconds(2), [])
    end_node(flow_id, "bad", "failed", started=t0 + seconds(3), finished=t0 + seconds(4))
    end(flow_id, "other", t0 + seconds(3), t0 + seconds(10), [])  # ends after `bad` died
    FlowRun.objects.filter(pk=flow_id).update(finished_at=t0 + seconds(10))

    graph = reads.flow_graph(flow_id)
    assert graph is not None and graph.flow.state == "failed"
    timeline = reads.flow_timeline(graph)

    assert {row.node.key for row in timeline.rows if row.critical} == {"extract", "bad"}
    assert timeline.critical == 2
