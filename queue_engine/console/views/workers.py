from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console.access import viewer_required


def workers_context(request: HttpRequest) -> dict[str, Any]:
    """The worker processes, then what each one runs now, like Sidekiq's Busy tab. A job
    whose worker is no longer registered is listed too: the rescuer will take it back."""
    processes = reads.workers()
    busy, more = reads.running_by_worker()
    known = {worker.id for worker in processes}
    running = [(worker, busy.get(worker.id, [])) for worker in processes]
    orphans = [job for owner, jobs in busy.items() if owner not in known for job in jobs]
    return {
        "page": "workers",
        "workers": processes,
        "running": [(worker, jobs) for worker, jobs in running if jobs],
        "orphans": orphans,
        "running_total": sum(len(jobs) for jobs in busy.values()),
        "running_more": more,
        "alive_after": reads.WORKER_ALIVE_AFTER,
    }


@viewer_required
def workers(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/workers.html", workers_context(request))
