"""One job: payload, result, attempts, timings, progress, the log tail, actions."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console.access import viewer_required
from queue_engine.console.pages.job import (
    detail_context,
)
from queue_engine.console.params import int_param


@viewer_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = reads.find_job(job_id)
    if job is None:
        raise Http404(f"Job {job_id} does not exist (it may have been removed or pruned).")
    around = int_param(request.GET, "around")
    context = detail_context(job, around)
    return render(request, "queue_engine/job.html", {"page": "jobs", **context})
