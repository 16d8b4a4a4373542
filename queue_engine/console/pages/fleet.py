"""What the metrics page shows: every queue together, over a window from 15 minutes to 30 days.

Everything on it comes from the metrics rollup (and the few minutes it has not counted
yet), never from a scan of the history: a window of 30 days reads hour buckets.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from queue_engine import reads
from queue_engine.console import charts, job_filters

DEFAULT_WINDOW = "1h"


KINDS_SHOWN = 50


def fleet_context(request: HttpRequest) -> dict[str, Any]:
    window = request.GET.get("window", DEFAULT_WINDOW)
    if window not in charts.WINDOWS:
        window = DEFAULT_WINDOW
    span = charts.WINDOWS[window]
    series = reads.metric_series(span)
    throughput = charts.throughput(series)
    jobs = reverse("queue_engine:jobs")
    # The jobs list's own ranges, where it has this window: the same dead jobs.
    in_range = {"range": window} if window in job_filters.RANGES else {}
    failures = [
        (
            row,
            f"{jobs}?{urlencode({'kind': row.kind, 'state': 'dead', **in_range})}",
            share(row.dead, row.ended),
        )
        for row in reads.kind_failures(span, limit=KINDS_SHOWN + 1)
    ]
    ended = sum(p.ended for p in series.points)
    return {
        "page": "metrics",
        "window": window,
        "windows": list(charts.WINDOWS),
        "throughput_chart": throughput,
        "latency_chart": charts.latency(series),
        "ended": ended,
        "dead_share": share(int(throughput.totals["failed"]), ended),
        "failures": failures[:KINDS_SHOWN],
        "failures_more": len(failures) > KINDS_SHOWN,
        "rolled_up": reads.rolled_up_to() is not None,
        "workers_alive": len(reads.alive_workers()),
    }


def share(part: int, whole: int) -> str:
    """`part` of `whole` in percent, to two significant digits: "0.3 %", "12 %"; "" if none."""
    if not part or not whole:
        return ""
    value = part / whole * 100
    return f"{value:.2g} %" if value < 10 else f"{value:.0f} %"
