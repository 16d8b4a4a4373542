"""What the overview shows: live counts by state and per queue, the workers, paused kinds,
recent failures and the database's health."""

from __future__ import annotations

from typing import Any

from queue_engine import ops, reads, states
from queue_engine.console import charts


def overview_context(
    trends: dict[str, charts.Trend] | None = None, failures: bool = True
) -> dict[str, Any]:
    """Everything the overview shows; the live socket passes cached trends and skips
    failures and the database's health between its slow refreshes."""
    queues = reads.queue_stats()
    return {
        "queues": queues,
        "totals": {
            state: sum(q.counts.get(state, 0) for q in queues) for state in states.LIVE_STATES
        },
        "estimated": set().union(*(q.estimated for q in queues)),
        "dead_total": sum(q.dead for q in queues),
        "workers": reads.alive_workers(),
        "paused_kinds": ops.paused_kinds(),
        "failures": reads.recent_failures() if failures else [],
        "health": reads.vacuum_health() if failures else None,
        "trends": trends if trends is not None else charts.queue_trends([q.name for q in queues]),
    }
