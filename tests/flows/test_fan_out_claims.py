"""A wide fan-out's children, counted down by the claims that take them
(sql.COUNT_DOWN_CLAIM): a child goes from blocked to running in one write, by the rules
a claim of available jobs keeps; any other child is released as available, as before."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from queue_engine import ops, sql
from queue_engine.flows import Flow
from queue_engine.models import FlowRange, FlowRelease, GroupLimit, Job, QueueConfig
from tests.support import jobs
from tests.support.flow_helpers import chunked, records, succeed_by_hand
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "fan-out-claims"


def left_to_count(width: int, leaf: Any = jobs.number) -> list[int]:
    """A flow whose root has succeeded and whose `width` children are all left to count
    in one range (as a settle leaves them, split). Returns the children's ids."""
    flow = Flow("left to count")
    flow.add("root", jobs.number, value=0)
    keys = flow.fan_out("leaf", leaf, [{"value": i} for i in range(width)], depends_on=["root"])
    flow_id = flow.submit()
    root = Job.objects.get(flow_id=flow_id, node_key="root")
    succeed_by_hand(root.id, "0")
    children = sorted(
        Job.objects.filter(flow_id=flow_id, node_key__in=keys).values_list("id", flat=True)
    )
    FlowRange.objects.create(
        flow_id=flow_id, parent_id=root.id, after_child=0, upto_child=children[-1]
    )
    return children


def claim(
    limit: int, *, queues: tuple[str, ...] = ("flows",), labels: tuple[str, ...] = (), **more: Any
) -> tuple[list[int], int]:
    """One COUNT_DOWN_CLAIM, as a worker's lane sends it: the ids it took, and how many
    children it counted down."""
    params = {
        "chunk": limit,
        "all_queues": False,
        "queues": list(queues),
        "labels": list(labels),
        "worker": WORKER,
        "token": 7,
        "weighted": False,
        **more,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.COUNT_DOWN_CLAIM, params)
        rows = cursor.fetchall()
    counted = [row[4] for row in rows if row[0] is None]
    return [row[0] for row in rows if row[0] is not None], counted[0]


def states(ids: list[int]) -> list[str]:
    found = dict(Job.objects.filter(pk__in=ids).values_list("id", "state"))
    return [found[i] for i in ids]


def test_a_claim_takes_the_children_it_has_room_for_and_moves_the_row_on() -> None:
    children = left_to_count(5)

    taken, counted = claim(3)

    assert (taken, counted) == (children[:3], 3)
    assert states(children) == ["running"] * 3 + ["blocked"] * 2
    for job in Job.objects.filter(pk__in=taken):
        assert job.lease_owner == WORKER and job.attempt == 1
        assert job.started_at is not None and job.lease_expires_at is not None
        assert job.parent_outputs == {"root": 0}  # the root's output, handed down
    row = FlowRange.objects.get()
    assert row.after_child == children[2]

    assert claim(3) == (children[3:], 2)
    assert not FlowRange.objects.exists()
    assert claim(3) == ([], 0)  # nothing left: the lane goes back to claiming


def test_children_go_behind_a_job_already_waiting_at_their_priority_or_above() -> None:
    children = left_to_count(4)
    jobs.number.enqueue(value=9)  # same queue and priority, waiting already

    assert claim(2) == ([], 2)
    # Released as available, with a later run time: the claim takes the waiting job first.
    assert states(children) == ["available", "available", "blocked", "blocked"]


def test_children_go_before_a_job_waiting_at_a_lower_priority() -> None:
    children = left_to_count(4)
    jobs.number.using(priority=-5).enqueue(value=9)

    taken, _ = claim(2)
    assert taken == children[:2]


def test_a_worker_with_weighted_queues_takes_children_only_while_nothing_waits() -> None:
    children = left_to_count(4)
    jobs.number.using(priority=-5).enqueue(value=9)

    assert claim(2, weighted=True) == ([], 2)
    assert states(children)[:2] == ["available", "available"]


def test_children_of_a_paused_queue_or_kind_are_released_not_taken() -> None:
    children = left_to_count(4)
    ops.pause_queue("flows", actor="test")

    assert claim(2) == ([], 2)
    assert states(children)[:2] == ["available", "available"]

    ops.resume_queue("flows", actor="test")
    ops.pause_kind(jobs.number.kind, actor="test")
    assert claim(2) == ([], 2)
    assert states(children)[2:] == ["available", "available"]


def test_children_of_a_queue_with_limits_or_of_another_queue_are_released_not_taken() -> None:
    children = left_to_count(6)

    assert claim(2, queues=("other",)) == ([], 2)  # not this worker's queue
    QueueConfig.objects.filter(name="flows").update(max_concurrency=50)
    assert claim(2) == ([], 2)  # its claims count its running jobs under its lock
    QueueConfig.objects.filter(name="flows").update(max_concurrency=None)
    GroupLimit.objects.create(queue="flows", group_key="acme", max_concurrency=1)
    assert claim(2) == ([], 2)
    assert states(children) == ["available"] * 6


def test_children_that_need_labels_are_taken_only_by_a_worker_with_them() -> None:
    children = left_to_count(4, leaf=jobs.number.using(labels=["gpu"]))

    taken, _ = claim(2, labels=("gpu", "ssd"))
    assert taken == children[:2]
    assert claim(2) == ([], 2)
    assert states(children)[2:] == ["available", "available"]


def test_children_nobody_has_room_for_are_released_after_the_grace(workers: Workers) -> None:
    """A worker whose one slot is taken sends no claim: the children its settle left to
    count are released, as available, within RELEASE_GRACE, and wait in the queue like
    any job (the console counts them, another worker could take them)."""
    flow = Flow("no room")
    flow.add("root", jobs.number, value=0)
    sleeper = jobs.cooperative.using(queue="flows")
    # A nap far longer than the waits below: while it runs, the slot stays taken.
    keys = flow.fan_out("nap", sleeper, [{"seconds": 60}] * 6, depends_on=["root"])
    flow_id = flow.submit()
    workers.start(
        "--queues", "flows", "--concurrency", "1", "--shutdown-timeout", "1", env=chunked(2)
    )

    wait_for(lambda: "root" in records(flow_id), timeout=20)
    naps = Job.objects.filter(flow_id=flow_id, node_key__in=keys)
    wait_for(lambda: naps.filter(state="running").exists(), timeout=10)
    # Generous for a loaded machine.
    wait_for(lambda: not naps.filter(state="blocked").exists(), timeout=10)
    assert naps.filter(state="running").count() == 1
    assert naps.filter(state="available").count() == 5
    assert not FlowRelease.objects.exists() and not FlowRange.objects.exists()


def test_a_settle_leaves_the_rest_of_a_wide_fan_out_in_ranges() -> None:
    """What the settle leaves (one FlowRelease row past its first chunk) becomes ranges of
    FLOW_RELEASE_CHUNK children, end to end, and the FlowRelease row goes."""
    flow = Flow("split")
    flow.add("root", jobs.number, value=0)
    keys = flow.fan_out("leaf", jobs.number, [{"value": i} for i in range(11)], depends_on=["root"])
    flow_id = flow.submit()
    root = Job.objects.get(flow_id=flow_id, node_key="root")
    children = sorted(
        Job.objects.filter(flow_id=flow_id, node_key__in=keys).values_list("id", flat=True)
    )
    FlowRelease.objects.create(flow_id=flow_id, parent_id=root.id, after_child=children[1])

    with connection.cursor() as cursor:
        cursor.execute(sql.SPLIT_RELEASES, {"chunk": 4})
        assert cursor.fetchone() == (3,)

    ranges = [(r.after_child, r.upto_child) for r in FlowRange.objects.order_by("id")]
    assert ranges == [
        (children[1], children[5]),
        (children[5], children[9]),
        (children[9], children[10]),
    ]
    assert not FlowRelease.objects.exists()
