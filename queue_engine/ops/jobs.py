"""Operator actions on jobs: cancel, retry, wake, remove and redrive, one by one or many.

Each action runs in one transaction together with the AuditEvent that records
it, and refuses what it cannot do with a message that says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from queue_engine import sql
from queue_engine.audit import actor_name, audit
from queue_engine.exceptions import OpsError
from queue_engine.models import Job, JobRecord
from queue_engine.ops.changes import flows_of, notify_changes, refresh_flows, refresh_flows_of

STATE_WORDS = {"failed": "dead", "cancelled": "cancelled"}


def _describe(job_id: int) -> str:
    record = JobRecord.objects.filter(pk=job_id).values_list("state", flat=True).first()
    if record is not None:
        return f"job {job_id} already ended ({record})"
    if Job.objects.filter(pk=job_id, meta__has_key="cancel_requested").exists():
        return f"job {job_id} was asked to stop already; it ends when its handler has stopped"
    return f"job {job_id} does not exist"


def cancel_job(job_id: int, *, actor: Any = None) -> None:
    """Cancel a live job; a running one is told to stop, and ends cancelled once its
    handler has (what the handler returns is dropped)."""
    if cancel_jobs([job_id], actor=actor) == 0:
        raise OpsError(f"Cannot cancel: {_describe(job_id)}.")


def cancel_jobs(ids: list[int], *, actor: Any = None, audited: bool = True) -> int:
    """Cancel live jobs and, for flow nodes, every live node downstream of them.

    A waiting job ends cancelled at once. A running one is asked to stop: it stays
    running (its slot still counted under the caps) until its worker has stopped the
    handler and settles it as cancelled, or its lease expires."""
    with transaction.atomic(), connection.cursor() as cursor:
        ids = _with_dependants(cursor, ids)
        params: dict[str, Any] = {"ids": ids, "actor": actor_name(actor)}
        cursor.execute(sql.OPS_CANCEL, params)  # the waiting ones
        rows = cursor.fetchall()
        cursor.execute(sql.OPS_REQUEST_CANCEL, params)  # the running ones
        running = [r[0] for r in cursor.fetchall()]
        rows += [(job_id,) for job_id in running]
        if running:
            cursor.execute(
                sql.NOTIFY_CONTROL,
                [json.dumps({"action": "cancel", "ids": running, "by": actor_name(actor)})],
            )
        if rows:
            notify_changes([], [r[0] for r in rows])
            refresh_flows_of(cursor, [r[0] for r in rows])
            if audited:
                audit(actor, "cancel", "job", _target(rows), len(rows), running=len(running))
    return len(rows)


def _with_dependants(cursor: Any, ids: list[int]) -> list[int]:
    """These ids plus every flow node downstream of them (flow nodes only have edges)."""
    cursor.execute(sql.DESCENDANTS, [ids])
    return sorted({r[0] for r in cursor.fetchall()} | set(ids))


def retry_job(job_id: int, *, actor: Any = None, clear_steps: bool = False) -> str:
    """Run a waiting job now, or redrive an ended one. Returns what was done.

    A redriven job keeps its recorded steps (`ctx.step`) unless `clear_steps`."""
    with transaction.atomic():
        live = Job.objects.select_for_update().filter(pk=job_id).first()
        if live is not None:
            if live.state == "running":
                raise OpsError(
                    f"Cannot retry job {job_id}: it is running now; cancel it first "
                    "or wait for it to end."
                )
            if live.state == "blocked":
                raise OpsError(f"Cannot retry job {job_id}: it waits for its flow's dependencies.")
            if live.state == "upstream_failed":
                cause = live.meta.get("upstream") or {}
                raise OpsError(
                    f"Cannot retry job {job_id}: its ancestor {cause.get('key')!r} (job "
                    f"{cause.get('job')}) is {STATE_WORDS.get(str(cause.get('state')), 'ended')}; "
                    "retry that node or requeue the flow, and this one waits for it again."
                )
            with connection.cursor() as cursor:
                cursor.execute(sql.OPS_RUN_NOW, {"ids": [job_id]})
                rows = cursor.fetchall()
            notify_changes([q for _, q in rows], [job_id])
            audit(actor, "retry", "job", str(job_id), 1, mode="run_now")
            return "run_now"
        flow_node = (
            JobRecord.objects.select_for_update()
            .filter(pk=job_id, state="succeeded", flow_id__isnull=False)
            .values_list("flow_id", "node_key")
            .first()
        )
        if flow_node is not None:
            raise OpsError(
                f"Cannot retry job {job_id}: it succeeded as node {flow_node[1]!r} of flow "
                f"{flow_node[0]} and its dependants already counted it, so run it again "
                "with its flow instead (requeue_flow if the flow failed or was cancelled, "
                "else rerun_flow)."
            )
        if (
            redrive_jobs(
                [job_id],
                actor=actor,
                states=("failed", "cancelled", "succeeded"),
                action="retry",
                clear_steps=clear_steps,
            )
            == 0
        ):
            raise OpsError(f"Cannot retry: job {job_id} does not exist.")
        return "redriven"


def retry_jobs(ids: list[int], *, actor: Any = None, clear_steps: bool = False) -> int:
    """Run these waiting jobs now and redrive the ended ones; running and blocked are left.
    Redriven jobs keep their recorded steps unless `clear_steps`."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.OPS_RUN_NOW, {"ids": ids})
        rows = cursor.fetchall()
        if rows:
            notify_changes([q for _, q in rows], [r[0] for r in rows])
            audit(actor, "retry", "job", _target(rows), len(rows), mode="run_now")
        redriven = redrive_jobs(
            ids,
            actor=actor,
            states=("failed", "cancelled", "succeeded"),
            action="retry",
            clear_steps=clear_steps,
        )
    return len(rows) + redriven


def wake_jobs(ids: list[int], *, actor: Any = None) -> int:
    """End the waits of these parked jobs now ("wake now"): a durable sleep returns, a
    wait for a signal times out (SignalTimeout, or its default). Others are left."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.OPS_WAKE_NOW, {"ids": ids, "actor": actor_name(actor)})
        rows = cursor.fetchall()
        if rows:
            notify_changes([q for _, q in rows], [r[0] for r in rows])
            audit(actor, "wake", "job", _target(rows), len(rows))
    return len(rows)


def reschedule_jobs(ids: list[int], when: datetime, *, actor: Any = None) -> int:
    """Give these parked or scheduled jobs another time: a durable sleep, or a wait for a
    signal with a deadline, now ends at `when` (earlier or later than before), and a
    scheduled job runs then. A time already past ends the wait now, as wake_jobs does,
    but as if its deadline had come. Jobs in other states are left; returns how many
    moved."""
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise OpsError(
            f"Cannot reschedule to {when!r}: give an aware datetime (with a time zone), "
            "such as django.utils.timezone.now() + timedelta(hours=1)."
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.OPS_RESCHEDULE, {"ids": ids, "when": when})
        rows = cursor.fetchall()
        if rows:
            due = [(job_id, queue) for job_id, queue, state in rows if state == "available"]
            notify_changes([q for _, q in due], [r[0] for r in rows])
            audit(
                actor,
                "reschedule",
                "job",
                _target(rows),
                len(rows),
                when=when.isoformat(),
            )
    return len(rows)


def remove_job(job_id: int, *, actor: Any = None) -> None:
    """Delete a job for good (waiting or ended). Running jobs are refused."""
    with transaction.atomic():
        state = Job.objects.filter(pk=job_id).values_list("state", flat=True).first()
        if state == "running":
            raise OpsError(f"Cannot remove job {job_id}: it is running now; cancel it first.")
        if remove_jobs([job_id], actor=actor) == 0:
            raise OpsError(f"Cannot remove: job {job_id} does not exist.")


def remove_jobs(ids: list[int], *, actor: Any = None, group: DeadGroupKey | None = None) -> int:
    """Delete these jobs (and the flow nodes downstream of them) for good, running ones
    excepted; the flows they belonged to are refreshed, as a cancel does. With `group`,
    audited as a batch of that dead-letter group's removal."""
    with transaction.atomic(), connection.cursor() as cursor:
        # A running node is left, and so is what depends on it (unless another node
        # removed here leads there too): it may still succeed and release them.
        cursor.execute(sql.RUNNING_AMONG, [ids])
        running = {r[0] for r in cursor.fetchall()}
        ids = _with_dependants(cursor, [i for i in ids if i not in running])
        flows = flows_of(cursor, ids)  # read before the rows that name them are gone
        cursor.execute(sql.OPS_REMOVE_LIVE, {"ids": ids})
        rows = cursor.fetchall()
        cursor.execute(sql.OPS_REMOVE_RECORDS, {"ids": ids})
        rows += cursor.fetchall()
        removed = [job_id for job_id, _flow in rows]
        nodes_of = [flow_id for _job, flow_id in rows if flow_id is not None]
        if nodes_of:
            cursor.execute(sql.OPS_COUNT_REMOVED_NODES, [nodes_of])
        cursor.execute(sql.FORGET_REMOVED, {"ids": removed})
        if removed:
            notify_changes([], removed)
            refresh_flows(flows)
            if group is None:
                audit(actor, "remove", "job", _target([(i,) for i in removed]), len(removed))
            else:
                audit_group(actor, "remove_group", group, removed)
    return len(removed)


def redrive_job(job_id: int, *, actor: Any = None, clear_steps: bool = False) -> None:
    """Put one dead (or cancelled) job back in its queue with fresh attempts; it keeps
    its recorded steps unless `clear_steps`."""
    if redrive_jobs([job_id], actor=actor, clear_steps=clear_steps) == 0:
        state = Job.objects.filter(pk=job_id).values_list("state", flat=True).first()
        if state is not None:
            raise OpsError(f"Cannot redrive job {job_id}: it has not ended (it is {state}).")
        raise OpsError(f"Cannot redrive: {_describe(job_id)}, not failed or cancelled.")


def redrive_jobs(
    ids: list[int],
    *,
    actor: Any = None,
    states: tuple[str, ...] = ("failed", "cancelled"),
    action: str = "redrive",
    queue: str | None = None,
    group: DeadGroupKey | None = None,
    clear_steps: bool = False,
) -> int:
    """Redrive these ended jobs; with `queue`, audited as a batch of that queue's redrive,
    with `group` as a batch of that dead-letter group's.

    The jobs keep the steps they recorded (`ctx.step`), so their next attempt resumes after
    the last finished step; `clear_steps` forgets them, and every step runs again.

    A flow node that succeeded is never run again on its own, whatever `states` allows:
    its dependants already counted it down, and a second settle would count them down
    again and start a fan-in early. Such ids are left as they are (not counted); the
    flow's requeue or rerun runs them again."""
    with transaction.atomic(), connection.cursor() as cursor:
        if "succeeded" in states:
            cursor.execute(sql.COUNTED_FLOW_NODES, [ids])
            counted = {r[0] for r in cursor.fetchall()}
            ids = [i for i in ids if i not in counted]
        cursor.execute(sql.OPS_REDRIVE, {"ids": ids, "states": list(states)})
        rows = cursor.fetchall()
        if rows:
            cursor.execute(sql.WAIT_FOR_PARENTS, [[r[0] for r in rows]])
            if clear_steps:
                cursor.execute(sql.CLEAR_STEPS, {"ids": [r[0] for r in rows]})
            extra = {"clear_steps": True} if clear_steps else {}
            notify_changes([q for _, q in rows], [r[0] for r in rows])
            refresh_flows_of(cursor, [r[0] for r in rows])
            if group is not None:
                audit_group(actor, "redrive_group", group, [r[0] for r in rows], **extra)
            elif queue is None:
                audit(actor, action, "job", _target(rows), len(rows), **extra)
            else:
                audit(
                    actor,
                    "redrive_queue",
                    "queue",
                    queue,
                    len(rows),
                    first=rows[0][0],
                    last=rows[-1][0],
                    **extra,
                )
    return len(rows)


def redrive_queue(
    queue: str, *, actor: Any = None, batch_size: int = 1000, clear_steps: bool = False
) -> int:
    """Redrive a queue's whole dead letter, in batches of short transactions (the jobs
    keep their recorded steps unless `clear_steps`)."""
    total, after = 0, 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                sql.OPS_DEAD_BATCH, {"queue": queue, "after": after, "limit": batch_size}
            )
            ids = [r[0] for r in cursor.fetchall()]
        if not ids:
            return total
        after = ids[-1]
        total += redrive_jobs(ids, actor=actor, queue=queue, clear_steps=clear_steps)


@dataclass(frozen=True)
class DeadGroupKey:
    """A dead-letter group: its dead jobs of one queue and kind whose last error has this
    class ("" for none)."""

    queue: str
    kind: str
    error_class: str

    def __str__(self) -> str:
        return f"{self.queue} · {self.kind} · {self.error_class or 'no error recorded'}"


def audit_group(actor: Any, action: str, group: DeadGroupKey, ids: list[int], **extra: Any) -> None:
    """One batch of a group action, named by its group and its count, not by its first job."""
    audit(
        actor,
        action,
        "dead group",
        str(group),
        len(ids),
        queue=group.queue,
        kind=group.kind,
        error_class=group.error_class,
        first=min(ids),
        last=max(ids),
        **extra,
    )


def _target(rows: list[tuple[Any, ...]]) -> str:
    ids = [str(r[0]) for r in rows]
    return ids[0] if len(ids) == 1 else f"{len(ids)} jobs: " + ", ".join(ids[:20])
