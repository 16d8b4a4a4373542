"""What the workers page shows: the live workers and what each one runs."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from queue_engine import reads


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
