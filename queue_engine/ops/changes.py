"""What every operator action shares: the notifications that wake workers and consoles,
and the refresh of the flows an action touched (who did it, and the audit row, are
queue_engine.audit's)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from queue_engine import sql


def notify_changes(queues: Iterable[str], ids: list[int]) -> None:
    """Wake workers of these queues and tell the console these jobs changed (at commit)."""
    with connection.cursor() as cursor:
        wake = sorted(set(queues))
        if wake:
            cursor.execute(sql.NOTIFY_QUEUES, [wake])
        cursor.execute(sql.NOTIFY_EVENT, [json.dumps({"type": "jobs", "ids": ids[:200]})])


def flows_of(cursor: Any, job_ids: list[int]) -> list[int]:
    """The flows these jobs (live or ended) are nodes of."""
    cursor.execute(sql.FLOWS_OF_JOBS, [job_ids, job_ids])
    return sorted(r[0] for r in cursor.fetchall())


def refresh_flows_of(cursor: Any, job_ids: list[int]) -> None:
    refresh_flows(flows_of(cursor, job_ids))


def refresh_flows(flow_ids: list[int]) -> None:
    """Recompute these flows' states now, and again once the transaction commits; first,
    which of their nodes can no longer run (an ancestor dead or cancelled)."""
    if flow_ids:
        with connection.cursor() as cursor:
            flows = sorted(set(flow_ids))
            unmark_upstream_failed(cursor, flows)
            cursor.execute(sql.MARK_UPSTREAM_FAILED_IN_FLOWS, {"flows": flows})
            cursor.execute(sql.REFRESH_FLOWS, [flows])
        refresh_after_commit(flow_ids)


def unmark_upstream_failed(cursor: Any, flow_ids: list[int]) -> None:
    """Every node of these flows that could no longer run waits again (blocked)."""
    cursor.execute(sql.UNMARK_UPSTREAM_FAILED, {"flows": flow_ids})


def refresh_after_commit(flow_ids: list[int]) -> None:
    """Refresh these flows' states again once the caller's transaction commits: inside
    it, a worker settling another node of the flow at the same moment is still unseen
    (see the worker's settle)."""

    def refresh() -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql.REFRESH_FLOWS, [sorted(set(flow_ids))])

    transaction.on_commit(refresh)
