"""DAG flows against real Postgres and real runworker processes."""

from __future__ import annotations

import random
import signal
import threading
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queue_engine import ops, sql
from queue_engine.definition.job import Backoff
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.exceptions import FlowError
from queue_engine.flows import Flow
from queue_engine.models import (
    FlowCountdown,
    FlowEdge,
    FlowRelease,
    FlowRun,
    Job,
    JobRecord,
)
from queue_engine.ops import flows as ops_flows
from tests.support import jobs
from tests.support.flow_helpers import chunked, flow_state, records, succeed_by_hand
from tests.support.workers import Workers, listening, wait_for

pytestmark = pytest.mark.slow


def saw(record: JobRecord) -> Any:
    """The parents' node keys a tests.node job saw, from its result."""
    assert record.result is not None
    return record.result["saw"]


def settle_by_hand(flow_id: int, key: str, result: str) -> int:
    """Settle a flow node by hand as succeeded (tests.support.flow_helpers.succeed_by_hand)."""
    node = Job.objects.get(flow_id=flow_id, node_key=key)
    succeed_by_hand(node.id, result)
    return node.id


def execution_order() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM test_executions ORDER BY ctid")
        return [r[0] for r in cursor.fetchall()]


def test_chain_runs_in_order_and_passes_outputs(workers: Workers, executions: None) -> None:
    flow = Flow("chain")
    for i in range(5):
        flow.add(f"step{i}", jobs.node, label=f"s{i}", depends_on=[f"step{i - 1}"] if i else [])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    finished = flow_state(flow_id, "succeeded")

    done = records(flow_id)
    assert [saw(done[f"step{i}"]) for i in range(5)] == [[]] + [[f"step{i}"] for i in range(4)]
    order = [done[f"step{i}"].id for i in range(5)]
    assert execution_order() == order
    assert finished.finished_at is not None
    assert finished.finished_at >= done["step4"].finished_at


def test_a_child_only_another_worker_can_run_starts_without_waiting_for_its_poll(
    workers: Workers,
) -> None:
    """A settle's own claim takes what it can of the children it releases, and then
    wakes the other workers for the rest (sql.WAKE_LEFT). The child's worker here polls
    every 30 s: only that wake-up can start it within the test's 10 s."""
    flow = Flow("hand-off")
    flow.add("here", jobs.number, value=1)
    flow.add("there", jobs.number.using(queue="elsewhere"), value=2, depends_on=["here"])
    flow_id = flow.submit()
    workers.start("--queues", "elsewhere", "--poll-interval", "30")
    wait_for(listening, message="the worker to listen for wake-ups")

    workers.start("--queues", "flows")
    flow_state(flow_id, "succeeded", timeout=10)

    done = records(flow_id)
    assert done["there"].queue == "elsewhere" and done["there"].result == 2


def test_diamond_joins_both_branches(workers: Workers) -> None:
    flow = Flow("diamond")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=10, depends_on=["a"])
    flow.add("c", jobs.number, value=100, depends_on=["a"])
    flow.add("d", jobs.sum_outputs, depends_on=["b", "c"])
    flow_id = flow.submit()
    assert Job.objects.get(flow_id=flow_id, node_key="d").state == "blocked"
    workers.start("--queues", "flows", "--concurrency", "4")

    flow_state(flow_id, "succeeded")

    assert records(flow_id)["d"].result == 110


def test_wide_fan_out_and_fan_in(workers: Workers) -> None:
    flow = Flow("wide")
    flow.add("root", jobs.number, value=0)
    keys = flow.fan_out("leaf", jobs.number, [{"value": 1}] * 1000, depends_on=["root"])
    flow.add("sum", jobs.sum_outputs, depends_on=keys)
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "50")
    workers.start("--queues", "flows", "--concurrency", "50")

    flow_state(flow_id, "succeeded", timeout=60)

    assert records(flow_id)["sum"].result == 1000
    assert FlowEdge.objects.filter(flow_id=flow_id).count() == 2000
    # The 1,000 leaves counted the join down by countdown rows (two workers settling
    # into one join); the release that ended them dropped every row.
    assert not FlowCountdown.objects.exists()


def test_a_fan_out_wider_than_the_release_chunk_is_released_a_chunk_at_a_time(
    workers: Workers,
) -> None:
    """The root's settle counts down its first FLOW_RELEASE_CHUNK children and leaves a
    FlowRelease row; its worker counts down the rest a chunk at a time. Every child
    runs once, the join sees them all, and no row is left."""
    flow = Flow("chunked")
    flow.add("root", jobs.number, value=0)
    keys = flow.fan_out("leaf", jobs.number, [{"value": 1}] * 60, depends_on=["root"])
    flow.add("sum", jobs.sum_outputs, depends_on=keys)
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "20", env=chunked(7))

    flow_state(flow_id, "succeeded")

    done = records(flow_id)
    assert done["sum"].result == 60 and len(done) == 62
    assert all(done[k].attempt == 1 for k in keys)
    assert not FlowRelease.objects.exists() and not FlowCountdown.objects.exists()


def test_a_chunk_that_completes_a_join_releases_it_without_the_leader(
    workers: Workers,
) -> None:
    """A child counted in a later chunk of a wide parent, whose other parent has already
    counted it down (a countdown row), is released by the worker counting the chunk, at
    once: not left for the leader's pass, which no process here runs."""
    flow = Flow("chunk completes a join")
    flow.add("other", jobs.number, value=1)
    flow.add("root", jobs.number, value=2, depends_on=["other"])
    flow.add("both", jobs.sum_outputs, depends_on=["root", "other"])
    # Children nobody serves: the root's chunks count them down, nothing settles them.
    for i in range(4):
        flow.add(f"c{i}", jobs.number.using(queue="held"), value=i, depends_on=["root"])
    flow_id = flow.submit()
    ids = dict(Job.objects.filter(flow_id=flow_id).values_list("node_key", "id"))
    # Chunks go in child id order: "both" is in the root's third chunk of 2.
    assert ids["both"] > max(ids[f"c{i}"] for i in range(4))
    workers.start("--queues", "flows", "--no-leader", env=chunked(2))

    wait_for(lambda: "both" in records(flow_id), timeout=20)
    done = records(flow_id)
    assert done["both"].result == 3
    assert not FlowRelease.objects.exists() and not FlowCountdown.objects.exists()


def test_the_leader_counts_down_what_a_dead_workers_settle_left(
    workers: Workers, executions: None
) -> None:
    """A worker that dies while counting a fan-out down in chunks leaves its
    FlowRelease row: the leader counts down the rest, each child exactly once, and a
    child with another parent still waits for it."""
    flow = Flow("left to count")
    flow.add("root", jobs.node, label="root")
    flow.add("other", jobs.node, label="other")
    for i in range(6):
        flow.add(f"c{i}", jobs.node, label=f"c{i}", depends_on=["root"])
    flow.add("both", jobs.node, label="both", depends_on=["root", "other"])
    flow_id = flow.submit()
    root_children = sorted(
        Job.objects.filter(flow_id=flow_id).exclude(node_key__in=["root", "other"]),
        key=lambda j: j.id,
    )
    # The root settled, and its settle counted its first two children (a chunk of 2):
    # released, or for "both" (still waiting for "other") a countdown row.
    root_id = settle_by_hand(flow_id, "root", '{"saw": []}')
    for child in root_children[:2]:
        if child.node_key == "both":
            FlowCountdown.objects.create(flow_id=flow_id, child_id=child.id, n=1)
        else:
            Job.objects.filter(pk=child.id).update(state="available", pending_deps=0)
    FlowRelease.objects.create(flow_id=flow_id, parent_id=root_id, after_child=root_children[1].id)

    workers.start("--queues", "flows", env=chunked(2))

    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    runs = execution_order()
    assert sorted(runs) == sorted(r.id for r in done.values() if r.node_key != "root")
    assert saw(done["both"]) == ["other", "root"]
    started = done["both"].started_at
    assert started is not None and started >= done["other"].finished_at
    assert not FlowRelease.objects.exists()


def test_requeue_drops_what_was_left_to_count_and_recounts_it(
    workers: Workers, executions: None
) -> None:
    """A FlowRelease row left when the flow failed must go with requeue_flow's recount:
    counted again afterwards, it would release children before their other parent."""
    flow = Flow("recount chunks")
    flow.add("root", jobs.node.using(queue="held"), label="root")  # no worker serves it
    flow.add("bad", jobs.node, label="bad", fail=True)
    for i in range(4):
        flow.add(f"c{i}", jobs.node, label=f"c{i}", depends_on=["root", "bad"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", env=chunked(2))
    flow_state(flow_id, "failed")
    workers.stop_all()
    children = sorted(
        Job.objects.filter(flow_id=flow_id, node_key__startswith="c"), key=lambda j: j.id
    )
    # The root settled and counted its first chunk, c0 and c1, by countdown rows ("bad"
    # was still pending then); c2 and c3 were left to count.
    root_id = settle_by_hand(flow_id, "root", '{"saw": []}')
    for child in children[:2]:
        FlowCountdown.objects.create(flow_id=flow_id, child_id=child.id, n=1)
    FlowRelease.objects.create(flow_id=flow_id, parent_id=root_id, after_child=children[1].id)
    JobRecord.objects.filter(flow_id=flow_id, node_key="bad").update(payload={"label": "bad"})

    assert ops_flows.requeue_flow(flow_id, actor="ops") == 1
    assert not FlowRelease.objects.exists() and not FlowCountdown.objects.exists()
    assert {j.pending_deps for j in Job.objects.filter(pk__in=[c.id for c in children])} == {1}

    workers.start("--queues", "flows", env=chunked(2))
    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    for i in range(4):
        assert saw(done[f"c{i}"]) == ["bad", "root"]
        started = done[f"c{i}"].started_at
        assert started is not None and started >= done["bad"].finished_at
    assert execution_order().count(done["c3"].id) == 1


def test_requeue_recounts_a_join_some_parents_had_counted_down(
    workers: Workers, executions: None
) -> None:
    flow = Flow("half-counted")
    flow.add("good", jobs.node, label="good")
    flow.add("bad", jobs.node.using(queue="held"), label="bad", fail=True)
    flow.add("join", jobs.node, label="join", depends_on=["good", "bad"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    # "bad" runs only once "good" has settled: settled in one batch, the two would
    # count the join down together, with no countdown row.
    wait_for(lambda: JobRecord.objects.filter(flow_id=flow_id, node_key="good").exists())
    workers.start("--queues", "held")
    flow_state(flow_id, "failed")
    join = Job.objects.get(flow_id=flow_id, node_key="join")
    # The join can no longer run, and "good" was counted by a countdown row (2 parents
    # pending, 1 settled).
    assert join.state == "upstream_failed"
    assert list(FlowCountdown.objects.values_list("child_id", "n")) == [(join.id, 1)]
    JobRecord.objects.filter(flow_id=flow_id, node_key="bad").update(payload={"label": "fixed"})

    assert ops_flows.requeue_flow(flow_id, actor="ops") == 1

    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    runs = execution_order()
    assert [runs.count(done[k].id) for k in ("good", "bad", "join")] == [1, 2, 1]
    assert sorted(saw(done["join"])) == ["bad", "good"]
    assert not FlowCountdown.objects.exists()


class ReleaseBeside:
    """RELEASE_COUNTED for one flow on a connection and a thread of its own, beside the
    test's transaction."""

    def __init__(self, conninfo: str, flow_id: int) -> None:
        self.conninfo, self.flow_id = conninfo, flow_id
        self.found: list[Any] = []
        self.thread = threading.Thread(target=self._release)
        self.pid: int | None = None

    def _release(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            self.pid = conn.info.backend_pid
            self.found.append(conn.execute(sql.RELEASE_COUNTED, [[self.flow_id]]).fetchone())

    def start(self) -> None:
        self.thread.start()

    def waits_for_a_lock(self) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [self.pid]
            )
            return cursor.fetchone() == ("Lock",)

    def outcome(self) -> Any:
        """(children released, wake-ups sent), once the release has ended."""
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the release still waits"
        return self.found[0]


def test_a_release_that_read_its_counts_before_a_requeue_does_not_release_the_join(
    transactional_db: None, conninfo: str
) -> None:
    """A release (the settle's, or the leader's net) that read a join's countdown rows
    before a requeue committed, and waited for the join's lock meanwhile, must not count
    those rows against the recount: the join would run before its requeued parent."""
    flow = Flow("release racing requeue")
    flow.add("good", jobs.node, label="good")
    flow.add("bad", jobs.node, label="bad")
    flow.add("join", jobs.node, label="join", depends_on=["good", "bad"])
    flow_id = flow.submit()
    join = Job.objects.get(flow_id=flow_id, node_key="join")
    # "good" succeeded and counted the join by a row; "bad" died; the join can no
    # longer run: the state a settle and the rescue leave.
    settle_by_hand(flow_id, "good", '{"saw": []}')
    FlowCountdown.objects.create(flow_id=flow_id, child_id=join.id, n=1)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS (DELETE FROM queue_engine_job WHERE flow_id = %s AND node_key = "
            "'bad' RETURNING *) INSERT INTO queue_engine_jobrecord (id, queue, kind, "
            "payload, attempt, max_attempts, errors, labels, flow_id, node_key, meta, "
            "progress_message, rescues, run_at, created_at, state, finished_at) SELECT id, "
            "queue, kind, payload, 1, max_attempts, errors, labels, flow_id, node_key, meta, "
            "'', 0, run_at, created_at, 'failed', now() FROM gone",
            [flow_id],
        )
    Job.objects.filter(pk=join.id).update(state="upstream_failed")
    FlowRun.objects.filter(pk=flow_id).update(state="failed")

    release = ReleaseBeside(conninfo, flow_id)
    with transaction.atomic():
        assert ops_flows.requeue_flow(flow_id, actor="ops") == 1
        # The release starts now: its snapshot holds the row for "good" and a join that
        # cannot run, which it passes over without waiting for the join's row (the
        # requeue holds it until it commits).
        release.start()
        assert release.outcome() == (0, 0)
    join.refresh_from_db()
    assert (join.state, join.pending_deps) == ("blocked", 1)


def test_a_release_does_not_count_rows_a_recount_dropped_while_it_waited(
    transactional_db: None, conninfo: str
) -> None:
    """A release that found a join ready in its snapshot and waited for the join's lock
    while a recount (a requeue's, a rerun's) made it wait again and dropped its rows
    must not release it with the sums it read before."""
    flow = Flow("release racing a recount")
    flow.add("a", jobs.node, label="a")
    flow.add("b", jobs.node, label="b")
    flow.add("join", jobs.node, label="join", depends_on=["a", "b"])
    flow_id = flow.submit()
    join = Job.objects.get(flow_id=flow_id, node_key="join")
    settle_by_hand(flow_id, "a", '{"saw": []}')
    settle_by_hand(flow_id, "b", '{"saw": []}')
    # Both parents counted the join by rows, and no release has run yet: ready.
    FlowCountdown.objects.filter(child_id=join.id).delete()
    FlowCountdown.objects.create(flow_id=flow_id, child_id=join.id, n=1)
    FlowCountdown.objects.create(flow_id=flow_id, child_id=join.id, n=1)
    Job.objects.filter(pk=join.id).update(state="blocked", pending_deps=2)

    release = ReleaseBeside(conninfo, flow_id)
    with transaction.atomic():
        # A recount holds the join: "b" is to run again, so the join waits for it
        # (pending 1) and its rows go.
        Job.objects.filter(pk=join.id).update(pending_deps=1)
        FlowCountdown.objects.filter(child_id=join.id).delete()
        release.start()
        wait_for(release.waits_for_a_lock)
    assert release.outcome() == (0, 0)
    join.refresh_from_db()
    assert (join.state, join.pending_deps) == ("blocked", 1)


def test_the_leader_releases_a_join_whose_release_was_lost(workers: Workers) -> None:
    """A worker that dies between its settle's commit and the release leaves the join
    counted down but blocked: the leader releases it."""
    flow = Flow("lost release")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=2)
    flow.add("sum", jobs.sum_outputs, depends_on=["a", "b"])
    flow_id = flow.submit()
    join = Job.objects.get(flow_id=flow_id, node_key="sum")
    for key, value in (("a", "1"), ("b", "2")):  # both settled, nobody released the join
        settle_by_hand(flow_id, key, value)
        FlowCountdown.objects.create(flow_id=flow_id, child_id=join.id, n=1)
    assert Job.objects.get(pk=join.id).state == "blocked"

    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")
    assert records(flow_id)["sum"].result == 3
    assert not FlowCountdown.objects.exists()


def test_a_node_completed_by_ctx_atomic_releases_its_children_with_its_output(
    workers: Workers, executions: None
) -> None:
    flow = Flow("atomic")
    flow.add("first", jobs.atomic_node, label="first")
    flow.add("second", jobs.atomic_node, label="second")
    flow.add("after", jobs.node, label="after", depends_on=["first", "second"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    assert done["first"].result == {"label": "first"}
    assert saw(done["after"]) == ["first", "second"]


def test_node_priority_and_flow_default(workers: Workers, executions: None) -> None:
    flow = Flow("priorities", priority=-5)
    flow.add("low", jobs.node, label="low")
    flow.add("high", jobs.node.using(priority=50), label="high")
    flow_id = flow.submit()

    priorities = dict(Job.objects.filter(flow_id=flow_id).values_list("node_key", "priority"))
    assert priorities == {"low": -5, "high": 50}
    workers.start("--queues", "flows", "--concurrency", "1")
    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    assert execution_order() == [done["high"].id, done["low"].id]


def test_dynamic_join_waits_for_a_two_level_subtree(workers: Workers) -> None:
    flow = Flow("dynamic")
    flow.add("coordinator", jobs.spawner, width=3, depth=2)
    flow.add("join", jobs.collect, depends_on=["coordinator"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", "--concurrency", "8")

    flow_state(flow_id, "succeeded")

    join = records(flow_id)["join"]
    # coordinator + 3 spawners (their output "spawned") + 9 leaves of value 1
    assert join.result == {"parents": 13, "ones": 9}
    # The last leaf can settle in the very transaction that claims the join: same now().
    assert join.started_at is not None
    assert join.started_at >= max(r.finished_at for k, r in records(flow_id).items() if k != "join")

    # A rerun clones the declared flow only: the coordinator spawns its subtree afresh.
    rerun_id = ops_flows.rerun_flow(flow_id, actor="ops")
    flow_state(rerun_id, "succeeded")
    assert records(rerun_id)["join"].result == {"parents": 13, "ones": 9}
    assert len(records(rerun_id)) == len(records(flow_id)) == 14


def test_dead_node_blocks_dependants_and_fails_the_flow(workers: Workers, executions: None) -> None:
    flow = Flow("broken")
    flow.add("ok", jobs.node, label="ok")
    flow.add("bad", jobs.node, label="bad", fail=True, depends_on=["ok"])
    flow.add("after", jobs.node, label="after", depends_on=["bad"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flow_id, "failed")

    bad = records(flow_id)["bad"]
    assert bad.state == "failed"
    after = Job.objects.get(flow_id=flow_id, node_key="after")
    assert after.state == "upstream_failed"
    assert after.meta["upstream"] == {"job": bad.id, "key": "bad", "state": "failed"}


def test_requeue_flow_reruns_only_what_failed(workers: Workers, executions: None) -> None:
    flow = Flow("resume")
    flow.add("ok", jobs.node, label="ok")
    flow.add("bad", jobs.node, label="bad", fail=True, depends_on=["ok"])
    flow.add("after", jobs.node, label="after", depends_on=["bad"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    flow_state(flow_id, "failed")
    JobRecord.objects.filter(flow_id=flow_id, node_key="bad").update(payload={"label": "fixed"})

    assert ops_flows.requeue_flow(flow_id, actor="ops") == 1

    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    runs = execution_order()
    assert runs.count(done["ok"].id) == 1
    assert runs.count(done["bad"].id) == 2
    assert saw(done["after"]) == ["bad"]


def test_rerun_flow_clones_the_whole_flow(workers: Workers) -> None:
    flow = Flow("clone me")
    flow.add("a", jobs.number.using(max_attempts=4), value=2)
    flow.add("b", jobs.sum_outputs, depends_on=["a"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    flow_state(flow_id, "succeeded")
    # As if the kind's backoff had changed in code since: the clone keeps the node's.
    JobRecord.objects.filter(flow_id=flow_id, node_key="a").update(
        backoff=Backoff.fixed(7).to_json()
    )

    new_id = ops_flows.rerun_flow(flow_id, actor="ops")

    assert new_id != flow_id
    flow_state(new_id, "succeeded")
    assert records(new_id)["b"].result == 2
    assert FlowRun.objects.get(pk=new_id).rerun_of == flow_id
    # The node's own options come along, its backoff too.
    clone = records(new_id)["a"]
    assert (Backoff.from_json(clone.backoff), clone.max_attempts) == (Backoff.fixed(7), 4)


def test_cancel_cascades_to_dependants_and_cancel_flow(workers: Workers) -> None:
    flow = Flow("cancel")
    flow.add("slow", jobs.cooperative, seconds=30)
    flow.add("child", jobs.number, value=1, depends_on=["slow"])
    flow.add("grandchild", jobs.number, value=1, depends_on=["child"])
    flow.add("other", jobs.cooperative, seconds=30)
    flow_id = flow.submit()
    workers.start("--queues", "slow,flows")
    slow = Job.objects.get(flow_id=flow_id, node_key="slow")
    wait_for(lambda: Job.objects.filter(pk=slow.id, state="running").exists())

    assert ops.cancel_jobs([slow.id], actor="ops") == 3
    # Its dependants end at once; the running node once its handler has stopped.
    assert not Job.objects.filter(flow_id=flow_id, node_key__in=["child", "grandchild"]).exists()
    wait_for(lambda: JobRecord.objects.filter(pk=slow.id, state="cancelled").exists(), timeout=5)
    assert set(Job.objects.filter(flow_id=flow_id).values_list("node_key", flat=True)) == {"other"}
    assert FlowRun.objects.get(pk=flow_id).state == "running"  # "other" still runs

    assert ops_flows.cancel_flow(flow_id, actor="ops") == 1
    flow_state(flow_id, "cancelled")
    assert {r.state for r in records(flow_id).values()} == {"cancelled"}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda f: (
                f.add("a", jobs.number, value=1, depends_on=["b"]),
                f.add("b", jobs.number, value=1, depends_on=["a"]),
            ),
            r"cycle: '(a|b)' -> '(a|b)' -> '\1'",
        ),
        (lambda f: f.add("a", jobs.number, value=1, depends_on=["a"]), "'a' depends on itself"),
        (
            lambda f: f.add("a", jobs.number, value=1, depends_on=["ghost"]),
            "'a' depends on unknown node\\(s\\) 'ghost'",
        ),
        (lambda f: f.add("a", "no.such.kind", value=1), "node 'a': Unknown job kind"),
        (lambda f: f.add("a", jobs.number, value={1, 2}), "node 'a'.*set at 'value'"),
        (
            lambda f: (
                f.add("a", jobs.number.using(dedup_key="k"), value=1),
                f.add("b", jobs.number.using(dedup_key="k"), value=2),
            ),
            "nodes 'a' and 'b' have the same kind and dedup key",
        ),
        (
            lambda f: (
                f.add("fetch", jobs.number, value=1),
                f.add("b", jobs.number, value=2, depends_on="fetch"),
            ),
            r"node 'b' got depends_on='fetch', a string; pass a list.*\['fetch'\]",
        ),
        (
            lambda f: f.fan_out("p", jobs.number, [{"value": 1}], depends_on="fetch"),
            r"fan-out 'p' got depends_on='fetch', a string",
        ),
        (lambda f: f.add("a\x00b", jobs.number, value=1), r"the node key 'a\\x00b' .*NUL"),
    ],
)
def test_bad_graphs_are_rejected_before_anything_is_written(
    transactional_db: None,
    build,  # type: ignore[no-untyped-def]
    message: str,
) -> None:
    flow = Flow("bad")

    with pytest.raises(FlowError, match=message):
        build(flow)
        flow.submit()

    assert not FlowRun.objects.exists() and not Job.objects.exists()
    assert not FlowEdge.objects.exists()


def test_a_dedup_key_a_live_job_holds_names_the_node_and_the_caller_goes_on(
    transactional_db: None,
) -> None:
    held = jobs.number.using(dedup_key="nightly").enqueue(value=0).pk
    flow = Flow("second")
    flow.add("free", jobs.number, value=1)
    flow.add("taken", jobs.number.using(dedup_key="nightly"), value=2, depends_on=["free"])

    with transaction.atomic():
        with pytest.raises(
            FlowError, match=rf"dedup key of node 'taken' \(key 'nightly', job {held}\)"
        ):
            flow.submit()
        Job.objects.filter(pk=held).update(priority=3)  # the transaction is still usable

    assert not FlowRun.objects.exists() and not FlowEdge.objects.exists()
    assert list(Job.objects.values_list("pk", "priority")) == [(held, 3)]


def test_a_repeated_parent_is_one_edge(workers: Workers) -> None:
    flow = Flow("twice")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=2, depends_on=["a", "a"])
    flow_id = flow.submit()

    assert FlowEdge.objects.count() == 1
    workers.start()
    flow_state(flow_id, "succeeded")


@pytest.mark.parametrize("name", [None, "", "  ", "x" * 256, "nightly\x00"])
def test_a_flow_name_that_cannot_be_listed_is_refused(name: object) -> None:
    with pytest.raises(FlowError, match=r"a flow's name must be text of 1 to 255|NUL"):
        Flow(name)  # type: ignore[arg-type]


def test_a_node_given_as_a_job_spec_keeps_its_options(workers: Workers) -> None:
    flow = Flow("by name", priority=3)
    spec = JobSpec(kind="tests.number", payload={"value": 5}, priority=33, max_attempts=2)
    flow.add("named", spec)
    flow.add("plain", "tests.number", value=6, depends_on=["named"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")

    flow_state(flow_id, "succeeded")

    done = records(flow_id)
    assert (done["named"].result, done["named"].priority, done["named"].max_attempts) == (5, 33, 2)
    assert (done["plain"].result, done["plain"].priority) == (6, 3)
    assert spec.priority == 33  # the caller's spec is not changed


def test_a_job_spec_node_refuses_arguments_beside_it(transactional_db: None) -> None:
    flow = Flow("spec")
    with pytest.raises(FlowError, match=r"node 'a' is a JobSpec.*JobSpec\(payload=\.\.\.\)"):
        flow.add("a", JobSpec(kind="tests.number"), value=1)


def test_duplicate_keys_are_refused_at_once(transactional_db: None) -> None:
    flow = Flow("dup")
    flow.add("a", jobs.number, value=1)

    with pytest.raises(FlowError, match="node key 'a' is used twice"):
        flow.add("a", jobs.number, value=2)


@st.composite
def dags(draw: st.DrawFn) -> dict[str, list[str]]:
    size = draw(st.integers(1, 50))
    graph: dict[str, list[str]] = {}
    for i in range(size):
        parents = draw(st.lists(st.integers(0, i - 1), max_size=4, unique=True)) if i else []
        graph[f"n{i}"] = [f"n{p}" for p in parents]
    return graph


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(graph=dags(), seed=st.integers(0, 2**16))
def test_random_dags_run_each_node_once_after_its_parents(
    workers: Workers, executions: None, graph: dict[str, list[str]], seed: int
) -> None:
    from queue_engine.models import QueueConfig

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE test_executions")
    QueueConfig.objects.update_or_create(name="flows", defaults={"lock_duration": 2})
    flow = Flow("random")
    for key, parents in graph.items():
        flow.add(key, jobs.node, label=key, depends_on=parents)
    flow_id = flow.submit()
    try:
        # Chunks of 2: a node with more children leaves the rest to count in chunks,
        # which the killed worker may leave half done.
        victim = workers.start("--queues", "flows", "--concurrency", "3", env=chunked(2))
        workers.start("--queues", "flows", "--concurrency", "3", env=chunked(2))
        wait_for(
            lambda: (
                JobRecord.objects.filter(flow_id=flow_id).count()
                >= random.Random(seed).randint(0, len(graph) // 2)
            ),
            timeout=60,
        )
        victim.send_signal(signal.SIGKILL)
        workers.start("--queues", "flows", "--concurrency", "3", env=chunked(2))

        flow_state(flow_id, "succeeded", timeout=120)
    finally:
        workers.stop_all()
        workers.procs.clear()

    done = records(flow_id)
    assert set(done) == set(graph)
    for key, parents in graph.items():
        started_at = done[key].started_at
        assert started_at is not None
        for parent in parents:
            assert done[parent].finished_at <= started_at
        assert saw(done[key]) == sorted(parents)
    with connection.cursor() as cursor:
        # At least once: the killed worker's jobs may have run twice, but every node
        # ran, and each succeeded exactly once (one history row per node).
        cursor.execute(
            "SELECT count(DISTINCT job_id) FROM test_executions WHERE job_id = ANY(%s)",
            [[r.id for r in done.values()]],
        )
        assert cursor.fetchone()[0] == len(graph)
    assert not FlowRelease.objects.exists()
