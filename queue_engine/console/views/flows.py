"""Flows: the list (filters in the URL, keyset pages) and one flow drawn as a graph,
with cancel / requeue / rerun behind a confirmation."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import reads, states
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.pages.flows import (
    ACTIONS,
    FlowFilters,
    flow_context,
    flows_context,
)
from queue_engine.console.params import htmx_target, int_param
from queue_engine.exceptions import OpsError


def affected(name: str, flow: reads.FlowRow) -> str:
    """The exact scope of an action, for its confirmation."""
    nodes = flow.nodes
    if name == "cancel":
        n = sum(nodes.get(s, 0) for s in states.LIVE_STATES)
        return f"{n} node{'s' if n != 1 else ''} {'have' if n != 1 else 'has'} not ended"
    if name == "requeue":
        n = nodes.get("failed", 0) + nodes.get("cancelled", 0)
        return (
            f"{n} dead or cancelled node{'s' if n != 1 else ''} {'run' if n != 1 else 'runs'} again"
        )
    return f"a new flow with this flow's declared nodes ({flow.total} here now)"


@viewer_required
def flows(request: HttpRequest) -> HttpResponse:
    filters = FlowFilters.from_query(request.GET)
    flow_id = int_param({"id": filters.q.removeprefix("#")}, "id")
    if (
        flow_id is not None
        and htmx_target(request) is None
        and reads.flow_graph(flow_id, max_nodes=1) is not None
    ):
        return redirect("queue_engine:flow", flow_id)
    template = "queue_engine/flows.html"
    if htmx_target(request) == "flow-results":
        template += "#flow-results"
    return render(request, template, flows_context(request))


@viewer_required
def flow_detail(request: HttpRequest, flow_id: int) -> HttpResponse:
    context = flow_context(flow_id, timeline=True)
    return render(request, "queue_engine/flow.html", {"page": "flows", **context})


@operator_required
def flow_action(request: HttpRequest, flow_id: int) -> HttpResponse:
    back = reverse("queue_engine:flow", args=[flow_id])
    name = request.POST.get("action", "")
    action = ACTIONS.get(name)
    if action is None:
        messages.error(request, f"Unknown flow action {name!r}: use the buttons on the flow page.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        context = flow_context(flow_id)
        if name not in context["flow_actions"]:
            messages.error(
                request,
                f"Flow {flow_id} is {context['flow'].state}: "
                f"{action.title.lower()} does not apply to it now.",
            )
            return redirect(back)
        return render(
            request,
            "queue_engine/confirm_flow.html",
            {
                "page": "flows",
                **context,
                "action": action,
                "action_name": name,
                "affected": affected(name, context["flow"]),
                "back": back,
            },
        )
    try:
        n = action.run(flow_id, actor=request.user)
    except OpsError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    if name == "rerun":
        messages.success(request, f"Flow #{flow_id} {action.done.format(n=n, s='')}.")
        return redirect("queue_engine:flow", n)
    messages.success(
        request, f"Flow #{flow_id}: {action.done.format(n=n, s='' if n == 1 else 's')}."
    )
    return redirect(back)
