"""The Kinds page: every job kind, its jobs and last hour, and its kill switch."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import ops, reads
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.pages.kinds import kinds_context
from queue_engine.exceptions import OpsError

ACTIONS = {"pause": ops.pause_kind, "resume": ops.resume_kind}


@viewer_required
def kinds(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/kinds.html", kinds_context(request))


@operator_required
def kind_action(request: HttpRequest) -> HttpResponse:
    """Pause or resume a kind: a confirmation that says what it does, then the change."""
    back = reverse("queue_engine:kinds")
    action = request.POST.get("action", "")
    kind = request.POST.get("kind", "")[:300]
    if action not in ACTIONS:
        messages.error(request, f"Unknown action {action!r}: use the Pause or Resume button.")
        return redirect(back)
    row = next((r for r in reads.kinds().rows if r.kind == kind), None)
    if row is None:
        messages.error(request, f"No kind {kind!r} is known: it may have been mistyped.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return render(
            request,
            "queue_engine/confirm_kind.html",
            {"page": "kinds", "row": row, "action": action, "back": back},
        )
    try:
        changed = ACTIONS[action](kind, actor=request.user)
    except OpsError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    if not changed:
        messages.info(request, f"Kind {kind} was {action}d already: nothing changed.")
    elif action == "pause":
        messages.success(
            request, f"Kind {kind} paused: no worker starts its jobs until it is resumed."
        )
    else:
        messages.success(request, f"Kind {kind} resumed: its waiting jobs run again.")
    return redirect(back)
