"""Rerun a flow from a node with an edited input: the plan, the payload editor, the rerun."""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import ops
from queue_engine.console.access import forbidden, viewer_required
from queue_engine.console.roles import OPERATE
from queue_engine.definition.registry import registry
from queue_engine.exceptions import OpsError
from queue_engine.masking import mask, take_back
from queue_engine.ops.rerun import RerunPlan

# JSON's names for the Python types a handler's parameters are annotated with; the editor
# checks a value against them as the operator types (anything else: any JSON value).
JSON_TYPES: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}
MAX_PAYLOAD_TEXT = 1_000_000


def parameters(kind: str) -> list[dict[str, Any]]:
    """The kind's parameters as the editor checks them: name, required, JSON types."""
    definition = registry.get(kind)
    if definition is None or definition.django_task:
        return []
    hints: dict[str, Any] = {}
    try:
        hints = typing.get_type_hints(definition.func)
    except Exception:  # an annotation that does not resolve: check names only
        hints = {}
    found = []
    for param in definition.signature.parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if definition.takes_context and param.name == "ctx":
            continue
        found.append(
            {
                "name": param.name,
                "required": param.default is inspect.Parameter.empty,
                "types": json_types(hints.get(param.name)),
            }
        )
    return found


def json_types(annotation: Any) -> list[str]:
    """["integer", "null"] for `int | None`; [] for anything the editor should not judge."""
    if annotation is None:
        return []
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [json_types(arg) for arg in typing.get_args(annotation)]
        return [] if any(not n for n in names) else sorted({t for n in names for t in n})
    if annotation is type(None):
        return ["null"]
    found = JSON_TYPES.get(origin or annotation)
    if found == "number":
        return ["integer", "number"]
    return [found] if found else []


def takes_any_keyword(kind: str) -> bool:
    definition = registry.get(kind)
    return definition is None or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in definition.signature.parameters.values()
    )


@viewer_required
def rerun_from(request: HttpRequest, flow_id: int) -> HttpResponse:
    """GET: the plan and the payload editor (an operator's page, as what it leads to);
    POST: the rerun."""
    if not request.user.has_perm(OPERATE):
        return forbidden(request, "operator")
    back = reverse("queue_engine:flow", args=[flow_id])
    node = (request.POST if request.method == "POST" else request.GET).get("node", "")[:300]
    try:
        plan = ops.plan_rerun_from(flow_id, node)
    except OpsError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    # Secrets show masked; what the operator leaves masked is taken back from the old
    # payload on the way in (restore), so the page never holds them.
    text = json.dumps(mask(plan.payload), indent=2, ensure_ascii=False)
    error = ""
    if request.method == "POST":
        text = request.POST.get("payload", "")
        new_id, error = _rerun(request, plan, text)
        if new_id is not None:
            messages.success(
                request,
                f"Flow #{flow_id} rerun from node {node} as flow #{new_id}: "
                f"{len(plan.runs)} node{'s' if len(plan.runs) != 1 else ''} run, "
                f"{len(plan.reused)} reused.",
            )
            return redirect("queue_engine:flow", new_id)
    return render(
        request,
        "queue_engine/rerun_flow.html",
        {
            "page": "flows",
            "flow_id": flow_id,
            "plan": plan,
            "payload_text": text,
            "masked": mask(plan.payload) != plan.payload,
            "error": error,
            "editor": {
                "parameters": parameters(plan.kind),
                "open": takes_any_keyword(plan.kind),
            },
            "back": back,
        },
        status=422 if error else 200,
    )


def _rerun(request: HttpRequest, plan: RerunPlan, text: str) -> tuple[int | None, str]:
    """The new flow's id, or None and why the edited payload was refused."""
    if len(text) > MAX_PAYLOAD_TEXT:
        return None, f"The payload is over {MAX_PAYLOAD_TEXT:,} characters: keep it small."
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"The payload is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
    try:
        payload = take_back(payload, plan.payload, f"flow #{plan.flow_id}")
    except ValueError as exc:
        return None, str(exc)
    try:
        return ops.rerun_flow_from(
            plan.flow_id, plan.node, payload, actor=request.user, plan=plan
        ), ""
    except OpsError as exc:
        return None, str(exc)
