"""Dynamic joins: node keys stay unique in a flow, and a retried spawner spawns once."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from queue_engine.flows import Flow
from queue_engine.models import Job, JobRecord
from tests.support import jobs
from tests.support.flow_helpers import flow_settled, flow_state, records
from tests.support.workers import Workers

pytestmark = pytest.mark.slow


def test_dynamic_spawn_refuses_a_key_another_node_has(workers: Workers) -> None:
    flow = Flow("clash")
    flow.add("coordinator", jobs.key_clasher)
    # The name the coordinator's child keyed "other" gets: coordinator[other].
    flow.add("coordinator[other]", jobs.number, value=1)
    flow.add("join", jobs.collect, depends_on=["coordinator", "coordinator[other]"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "4")

    flow_settled(flow_id, "failed")  # `other` may end after the coordinator failed the flow

    done = records(flow_id)
    coordinator = done["coordinator"]
    assert coordinator.state == "failed"
    assert "'coordinator[other]'" in json.dumps(coordinator.errors)
    assert done["coordinator[other]"].result == 1
    # Nothing was spawned: the declared node is the only one keyed "coordinator[other]".
    nodes = (
        Job.objects.filter(flow_id=flow_id).count()
        + JobRecord.objects.filter(flow_id=flow_id).count()
    )
    assert nodes == 3
    assert Job.objects.get(flow_id=flow_id, node_key="join").state == "upstream_failed"


def test_dynamic_spawner_retried_after_spawning_reuses_its_children(
    workers: Workers, executions: None
) -> None:
    flow = Flow("retried")
    flow.add("coord", jobs.spawn_then_fail, width=2)
    flow.add("join", jobs.collect, depends_on=["coord"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "4")

    flow_state(flow_id, "succeeded")

    done = records(flow_id)
    assert done["coord"].attempt == 2
    children = {str(k): r for k, r in done.items() if k not in ("coord", "join")}
    # Named from the spawner's key, the same on the retry: the same children.
    assert sorted(children) == ["coord[0]", "coord[1]"]
    # coord + its 2 children, each output there once.
    assert done["join"].result == {"parents": 3, "ones": 2}
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM test_executions ORDER BY job_id")
        ran = [row[0] for row in cursor.fetchall()]
    assert ran == sorted(r.id for r in children.values())


def test_spawned_children_take_the_flows_priority(workers: Workers) -> None:
    flow = Flow("prioritised", priority=7)
    flow.add("coord", jobs.spawner.using(priority=50), width=2, depth=1)
    flow.add("join", jobs.collect, depends_on=["coord"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")

    done = records(flow_id)
    children = [r for k, r in done.items() if k not in ("coord", "join")]
    assert len(children) == 2
    # As for the nodes submitted with the flow: the flow's priority, not the
    # spawner's own and not the kind's default.
    assert [r.priority for r in children] == [7, 7]
    assert (done["coord"].priority, done["join"].priority) == (50, 7)


def test_a_child_spawned_inside_ctx_atomic_commits_with_the_spawner(workers: Workers) -> None:
    flow = Flow("spawn in atomic")
    flow.add("spawner", jobs.spawn_in_atomic)
    flow.add("join", jobs.collect, depends_on=["spawner"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")

    assert records(flow_id)["join"].result == {"parents": 2, "ones": 1}


def test_a_spawned_child_is_a_job_spec_or_its_arguments_go_by_name(workers: Workers) -> None:
    flows = {}
    for how in ("spec", "positional"):
        flow = Flow(f"spawn by {how}")
        flow.add("spawner", jobs.spawn_by, how=how)
        flow.add("join", jobs.collect, depends_on=["spawner"])
        flows[how] = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flows["spec"], "succeeded")
    flow_state(flows["positional"], "failed")

    by_spec = records(flows["spec"])
    child = next(r for k, r in by_spec.items() if k not in ("spawner", "join"))
    assert (child.result, child.priority) == (1, 9)
    failed = records(flows["positional"])["spawner"]
    assert "names its kind as a string, so pass its arguments by name" in json.dumps(failed.errors)
    # Nothing was spawned: the spawner's attempt failed before any child was written.
    assert not JobRecord.objects.filter(flow_id=flows["positional"], kind="tests.number").exists()


def test_an_async_handler_spawns_into_a_join_with_aspawn_into_and_afan_out_into(
    workers: Workers,
) -> None:
    flow = Flow("async spawner")
    flow.add("spawner", jobs.async_spawner, width=3)
    flow.add("join", jobs.collect, depends_on=["spawner"])
    workers.start("--queues", "flows", "--concurrency", "4")

    flow_id = flow.submit()

    flow_state(flow_id, "succeeded")
    nodes = records(flow_id)
    spawner, join = nodes.pop("spawner"), nodes.pop("join")
    outputs = {key: node.result for key, node in nodes.items()}
    assert outputs.pop("spawner[first]") == 10
    assert sorted(map(str, outputs)) == ["spawner[0]", "spawner[1]", "spawner[2]"]
    assert list(outputs.values()) == [1, 1, 1]
    # The spawner got back the ids of the jobs it spawned; the join waited for them all.
    assert spawner.result == sorted(node.id for node in nodes.values())
    assert join.result == {"parents": 5, "ones": 3}


def test_spawned_children_are_named_from_their_spawner_across_its_calls(
    workers: Workers,
) -> None:
    flow = Flow("stock")
    flow.add("stock", jobs.spawn_twice)
    flow.add("join", jobs.collect, depends_on=["stock"])
    nested = Flow("nested")
    nested.add("coord", jobs.spawner, width=2, depth=2)
    nested.add("join", jobs.collect, depends_on=["coord"])
    flow_id, nested_id = flow.submit(), nested.submit()
    workers.start("--queues", "flows", "--concurrency", "4")

    flow_state(flow_id, "succeeded")
    flow_state(nested_id, "succeeded")

    done = records(flow_id)
    # Three children, from two calls: numbered on, not the second call's first child
    # taken for the first call's.
    assert sorted(map(str, done)) == ["join", "stock", "stock[0]", "stock[1]", "stock[2]"]
    assert done["join"].result == {"parents": 4, "ones": 3}
    assert {r.meta["spawned_by"] for k, r in done.items() if "[" in str(k)} == {done["stock"].id}
    assert sorted(map(str, records(nested_id))) == [
        "coord",
        "coord[0]",
        "coord[0][0]",
        "coord[0][1]",
        "coord[1]",
        "coord[1][0]",
        "coord[1][1]",
        "join",
    ]
