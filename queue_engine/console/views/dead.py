"""The dead letter, grouped by queue, kind and error class; redrive or remove a whole group."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import ops, reads
from queue_engine.console import actions
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.pages.dead import dead_context
from queue_engine.console.params import int_param

GROUP_ACTIONS = {
    "redrive": ("Redrive", actions.FRESH_ATTEMPTS, "redriven"),
    "remove": ("Remove", actions.DELETED, "removed"),
}


@viewer_required
def dead(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/dead.html", dead_context(request))


@operator_required
def dead_group_action(request: HttpRequest) -> HttpResponse:
    back = reverse("queue_engine:dead")
    action = request.POST.get("action", "")
    group = ops.DeadGroupKey(
        request.POST.get("queue", ""),
        request.POST.get("kind", ""),
        request.POST.get("error_class", ""),
    )
    upto = int_param(request.POST, "upto")
    if action not in GROUP_ACTIONS or not group.queue or not group.kind or upto is None:
        messages.error(request, "That group action was incomplete: use the buttons on this page.")
        return redirect(back)
    verb, effect, done_word = GROUP_ACTIONS[action]
    if request.POST.get("confirm") != "yes":
        try:
            with reads.time_limited():
                count = reads.dead_group_queryset(
                    group.queue, group.kind, group.error_class, upto
                ).count()
        except reads.NarrowFilter as exc:
            messages.error(request, str(exc))
            return redirect(back)
        return render(
            request,
            "queue_engine/confirm_group.html",
            {
                "page": "dead",
                "verb": verb,
                "effect": actions.said(count, effect),
                "count": count,
                "group": group,
                "upto": upto,
                "action": action,
                "back": back,
            },
        )
    done = 0
    run = ops.redrive_jobs if action == "redrive" else ops.remove_jobs
    for ids in reads.dead_group_batches(group.queue, group.kind, group.error_class, upto):
        done += run(ids, actor=request.user, group=group)
    noun = "job" if done == 1 else "jobs"
    messages.success(request, f"{done} dead {noun} of {group} {done_word}.")
    return redirect(back)
