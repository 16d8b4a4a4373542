"""A flow node's parents' outputs travel with it (Job.parent_outputs) once its last
parents have counted it down, so that its claim reads nothing of the history for them;
a node whose outputs were not handed down whole reads them from the history, and sees
the same."""

from __future__ import annotations

import pytest

from queue_engine import ops
from queue_engine.flows import Flow
from queue_engine.models import Job
from tests.support import jobs, wait_jobs
from tests.support.flow_helpers import (
    chunked,
    flow_settled,
    flow_state,
    records,
    succeed_by_hand,
)
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow

HELD = "held"  # a paused queue: its nodes wait there, released, for the test to look


def released(flow_id: int, key: str) -> Job:
    return wait_for(
        lambda: Job.objects.filter(flow_id=flow_id, node_key=key, state="available").first(),
        timeout=30,
        message=f"node {key} to be released",
    )


def test_children_and_a_join_are_handed_their_parents_outputs(workers: Workers) -> None:
    """A fan-out's children get the root's output as they are released, the last of
    them by the chunks counted after the root's settle (FLOW_RELEASE_CHUNK 7 of 41);
    the join gets all 40 leaves' outputs, which two workers settled into countdown rows."""
    ops.pause_queue(HELD)
    flow = Flow("handed down")
    flow.add("root", jobs.number, value=5)
    leaves = flow.fan_out(
        "leaf", jobs.number, [{"value": i} for i in range(40)], depends_on=["root"]
    )
    flow.add("last child", wait_jobs.echo_outputs.using(queue=HELD), depends_on=["root"])
    flow.add("join", wait_jobs.echo_outputs.using(queue=HELD), depends_on=leaves)
    flow_id = flow.submit()
    for _ in range(2):
        workers.start("--queues", "flows", "--concurrency", "8", env=chunked(7))

    join = released(flow_id, "join")
    child = released(flow_id, "last child")

    expected = {key: i for i, key in enumerate(leaves)}
    assert child.parent_outputs == {"root": 5}
    assert join.parent_outputs == expected
    ops.resume_queue(HELD)
    workers.start("--queues", HELD)
    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    assert done["last child"].result == {"root": 5}
    assert done["join"].result == expected


def test_a_node_that_completed_in_its_own_transaction_hands_its_output_down(
    workers: Workers,
) -> None:
    """A node that ctx.atomic() completed has its return value recorded at its settle
    (RECORD_RESULT_FLOW), which only then counts its children down: they get that value
    handed down, a join of two such nodes both values."""
    ops.pause_queue(HELD)
    flow = Flow("atomic outputs")
    flow.add("first", jobs.atomic_node, label="first")
    flow.add("second", jobs.atomic_node, label="second")
    flow.add("next", wait_jobs.echo_outputs.using(queue=HELD), depends_on=["first"])
    flow.add("join", wait_jobs.echo_outputs.using(queue=HELD), depends_on=["first", "second"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "4")

    following = released(flow_id, "next")
    join = released(flow_id, "join")

    assert following.parent_outputs == {"first": {"label": "first"}}
    assert join.parent_outputs == {"first": {"label": "first"}, "second": {"label": "second"}}
    ops.resume_queue(HELD)
    workers.start("--queues", HELD)
    flow_state(flow_id, "succeeded")
    assert records(flow_id)["join"].result == join.parent_outputs


def test_a_large_output_is_read_from_the_history(workers: Workers) -> None:
    """An output over HAND_DOWN_BYTES is not copied into the children's rows: the
    child's parent_outputs stay empty and its claim reads both parents' outputs from
    the history."""
    ops.pause_queue(HELD)
    big = "x" * 5000
    flow = Flow("large output")
    flow.add("big", jobs.async_echo.using(queue="flows"), value=big)
    flow.add("small", jobs.number, value=1)
    flow.add("after", wait_jobs.echo_outputs.using(queue=HELD), depends_on=["big", "small"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "4")

    assert released(flow_id, "after").parent_outputs is None
    ops.resume_queue(HELD)
    workers.start("--queues", HELD)
    flow_state(flow_id, "succeeded")
    assert records(flow_id)["after"].result == {"big": big, "small": 1}


def test_the_claim_hands_a_node_the_outputs_on_its_row(workers: Workers) -> None:
    """What the row carries is what the handler gets: the claim reads nothing else."""
    flow = Flow("from the row")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=2)
    flow.add("after", wait_jobs.echo_outputs, depends_on=["a", "b"])
    flow_id = flow.submit()
    for key, value in (("a", "1"), ("b", "2")):  # settled without counting anything down
        succeed_by_hand(Job.objects.get(flow_id=flow_id, node_key=key).id, value)
    Job.objects.filter(flow_id=flow_id, node_key="after").update(
        state="available", pending_deps=0, parent_outputs={"a": 10, "b": 20}
    )

    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")
    assert records(flow_id)["after"].result == {"a": 10, "b": 20}


def test_a_node_some_of_whose_parents_were_reused_reads_them_all_from_the_history(
    workers: Workers, executions: None
) -> None:
    """A rerun from a node counts the reused parents down as it writes the new flow,
    and the rerun node's settle counts the rest: no settle saw them all, so nothing is
    handed down, and the join reads both outputs from the history."""
    ops.pause_queue(HELD)
    flow = Flow("diamond")
    flow.add("root", jobs.node, label="root")
    flow.add("left", jobs.node, label="left", depends_on=["root"])
    flow.add("right", jobs.node, label="right", fail=True, depends_on=["root"])
    flow.add("join", wait_jobs.echo_outputs.using(queue=HELD), depends_on=["left", "right"])
    old_id = flow.submit()
    workers.start("--queues", "flows")
    flow_settled(old_id, "failed")
    new_id = ops.rerun_flow_from(old_id, "right", {"label": "fixed", "fail": False}, actor="ops")

    join = released(new_id, "join")

    assert (join.parents, join.parent_outputs) == (2, None)
    ops.resume_queue(HELD)
    workers.start("--queues", HELD)
    flow_state(new_id, "succeeded")
    assert records(new_id)["join"].result == {
        "left": {"label": "left", "saw": ["root"]},
        "right": {"label": "fixed", "saw": ["root"]},
    }
