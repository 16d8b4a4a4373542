"""The jobs list (filters in the URL, keyset pages) and bulk actions on a selection."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import reads
from queue_engine.console import actions, job_filters, job_tabs, matching
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.params import htmx_target, int_param, safe_next
from queue_engine.definition.registry import registry
from queue_engine.models import QueueConfig


@viewer_required
def jobs(request: HttpRequest) -> HttpResponse:
    filters = job_filters.JobFilters.from_query(request.GET)
    if (
        filters.job_id is not None
        and htmx_target(request) is None
        and reads.find_job(filters.job_id)
    ):
        return redirect("queue_engine:job", filters.job_id)
    before, after = int_param(request.GET, "before"), int_param(request.GET, "after")
    error = ""
    page, ordered = reads.JobPage([], None, None), None
    try:
        if filters.sort:
            ordered = job_filters.sorted_page(filters)
        else:
            page = job_filters.job_page(filters, before=before, after=after)
        tabs = job_tabs.state_tabs(filters)
    except reads.NarrowFilter as exc:
        error, tabs = str(exc), []
    context = {
        "page": "jobs",
        "filters": filters,
        "jobs": page,
        "ordered": ordered,
        "rows": ordered.jobs if ordered else page.jobs,
        "sort_window": reads.SORT_WINDOW,
        "scan_ids": f"{reads.SCAN_IDS:,}",
        "tabs": tabs,
        "tabs_left_out": job_tabs.left_out(tabs),
        "no_error_class": job_filters.NO_ERROR_CLASS,
        "sort": filters.sort_key,
        "descending": filters.descending,
        "sorts": job_filters.sort_links(filters),
        "error": error,
        "ranges": [
            ("", "Any time"),
            ("15m", "Last 15 min"),
            ("1h", "Last hour"),
            ("24h", "Last 24 h"),
            ("7d", "Last 7 days"),
        ],
        "queue_names": QueueConfig.objects.values_list("name", flat=True),
        "kinds": sorted(registry.kinds()),
        "actions": actions.ACTIONS,
        "match": matching.filter_params(filters),
    }
    template = "queue_engine/jobs.html"
    if htmx_target(request) == "job-results":
        template += "#job-results"
    return render(request, template, context)


@operator_required
def bulk(request: HttpRequest) -> HttpResponse:
    back = safe_next(request, reverse("queue_engine:jobs"))
    action = cast(actions.Action, request.POST.get("action", ""))
    if action not in actions.ACTIONS:
        messages.error(request, f"Unknown action {action!r}: use one of the buttons.")
        return redirect(back)
    if request.POST.get("scope") == "matching":
        return bulk_matching(request, action, back)
    ids = actions.parse_ids(request.POST.getlist("ids"))
    if not ids:
        messages.warning(request, "Select at least one job first.")
        return redirect(back)
    if request.POST.get("confirm") == "yes":
        clear_steps = request.POST.get("clear_steps") == "yes"
        done = actions.execute(action, ids, request.user, clear_steps=clear_steps)
        messages.success(request, actions.outcome_message(action, len(ids), done))
        return redirect(back)
    plan = actions.plan(action, ids)
    return render(
        request,
        "queue_engine/confirm_jobs.html",
        {
            "page": "jobs",
            "plan": plan,
            "back": back,
            "selected": len(ids),
        },
    )


def bulk_matching(request: HttpRequest, action: actions.Action, back: str) -> HttpResponse:
    """The action on every job matching the filter: count them, then do it (or start a job)."""
    params = {name: request.POST.get(f"match_{name}", "") for name in matching.FILTER_FIELDS}
    upto = int_param(request.POST, "upto")
    try:
        plan = matching.plan(action, params, upto)
    except (reads.NarrowFilter, reads.FilterError) as exc:
        messages.error(request, str(exc))
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return render(
            request,
            "queue_engine/confirm_matching.html",
            {
                "page": "jobs",
                "plan": plan,
                "back": back,
                "described": describe(params),
            },
        )
    actor = request.user.get_username()
    if plan.background:
        job_id = matching.start_in_background(plan, actor)
        messages.success(
            request,
            f"{plan.verb} of {plan.count} jobs runs in the background "
            f"as job #{job_id}; its progress shows here.",
        )
        return redirect("queue_engine:job", job_id)
    done = matching.execute(action, params, plan.upto, request.user)
    messages.success(request, actions.outcome_message(action, plan.count, done))
    return redirect(back)


def describe(params: dict[str, str]) -> list[tuple[str, str]]:
    labels = {
        "queue": "queue",
        "state": "state",
        "kind": "kind",
        "q": "name contains",
        "payload": "payload contains",
        "meta": "meta contains",
        "error_class": "last error class",
        "message": "last error message contains",
        "worker": "worker",
        "group": "group key",
        "since": "since",
    }
    return [(labels[k], v) for k, v in params.items() if v]
