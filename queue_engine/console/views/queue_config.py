"""Edit a queue's configuration and its group limits, each change confirmed before it is made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import queue_defaults
from queue_engine.console.access import operator_required
from queue_engine.console.pages.queues import queue_context
from queue_engine.console.queue_form import (
    COUNT,
    FIELDS,
    as_input,
    config_rows,
    current_values,
    parse,
    shown,
)
from queue_engine.exceptions import OpsError
from queue_engine.models import GroupLimit
from queue_engine.ops import queues as ops_queues
from queue_engine.templatetags.queue_engine import duration


@dataclass
class Change:
    label: str
    old: str
    new: str


def edit_page(request: HttpRequest, name: str, **context: Any) -> HttpResponse:
    """The queue's forms again, with what was wrong next to the field: nothing was written."""
    base = queue_context(name)
    return render(
        request,
        "queue_engine/queue_config.html",
        {
            "page": "queues",
            **base,
            "rows": context.pop("rows", None) or config_rows(name, base["config"]),
            "group_limits": GroupLimit.objects.filter(queue=name).order_by("group_key"),
            **context,
        },
    )


def confirm_page(
    request: HttpRequest, name: str, title: str, changes: list[Change], **context: Any
) -> HttpResponse:
    return render(
        request,
        "queue_engine/confirm_queue_config.html",
        {
            "page": "queues",
            "name": name,
            "title": title,
            "changes": changes,
            "back": reverse("queue_engine:queue", args=[name]),
            **context,
        },
    )


def applied(request: HttpRequest, back: str, run: Callable[[], object], done: str) -> HttpResponse:
    """Run a confirmed change through ops and say how it went on the queue page."""
    try:
        run()
    except OpsError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect(back)


@operator_required
def edit_config(request: HttpRequest, name: str) -> HttpResponse:
    config = queue_context(name)["config"]
    current = current_values(name, config)
    rows = config_rows(name, config)
    values = {}
    for row in rows:
        if row.name not in request.POST:
            continue
        row.value = request.POST[row.name]
        try:
            values[row.name] = parse(name, row.name, row.value)
        except OpsError as exc:
            row.error = str(exc)
    if any(row.error for row in rows):
        return edit_page(request, name, rows=rows)
    changed = {field: value for field, value in values.items() if current[field] != value}
    back = reverse("queue_engine:queue", args=[name])
    if not changed:
        messages.info(request, f"Nothing changed: queue {name} already has these values.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return confirm_page(
            request,
            name,
            f"Change the configuration of {name}?",
            [
                Change(FIELDS[f][0], shown(FIELDS[f][1], current[f], f), shown(FIELDS[f][1], v, f))
                for f, v in changed.items()
            ],
            action=reverse("queue_engine:queue_config", args=[name]),
            fields=[(f, as_input(FIELDS[f][1], v)) for f, v in changed.items()],
            explain="Workers use the new values from their next claim. Settings no longer "
            "change these fields until you hand them back.",
        )
    labels = ", ".join(FIELDS[f][0].lower() for f in changed)
    return applied(
        request,
        back,
        lambda: ops_queues.update_queue_config(name, actor=request.user, **changed),
        f"Queue {name} updated: {labels}.",
    )


@operator_required
def reset_config(request: HttpRequest, name: str) -> HttpResponse:
    config = queue_context(name)["config"]
    back = reverse("queue_engine:queue", args=[name])
    edited = [f for f in FIELDS if config and f in config.edited_fields]
    asked = request.POST.getlist("field") or edited
    unknown = sorted(set(asked) - set(FIELDS))
    if unknown:
        messages.error(request, f"Unknown setting(s) {', '.join(unknown)}: use the buttons here.")
        return redirect(back)
    fields = [f for f in FIELDS if f in asked and f in edited]
    if not fields:
        messages.info(request, f"Nothing to hand back: queue {name} already uses the settings.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        current = current_values(name, config)
        setting = queue_defaults.starting_values(name)
        return confirm_page(
            request,
            name,
            f"Use the settings for {name}?",
            [
                Change(label, shown(kind, current[f], f), shown(kind, setting[f], f))
                for f, (label, kind) in FIELDS.items()
                if f in fields
            ],
            action=reverse("queue_engine:queue_config_reset", args=[name]),
            fields=[("field", f) for f in fields],
            explain="These fields take the values QUEUE_ENGINE gives this queue, and follow "
            "the settings again from now on.",
        )
    labels = ", ".join(FIELDS[f][0].lower() for f in fields)
    return applied(
        request,
        back,
        lambda: ops_queues.reset_queue_config(name, *fields, actor=request.user),
        f"Queue {name} uses the settings again for {labels}.",
    )


def group_limit_values(
    name: str, key: str, raw_cap: str, raw_rate: str
) -> tuple[int | None, int | None, str | None]:
    """The cap and the rate the group form asks for, or what is wrong with them."""
    if raw_cap and not COUNT.fullmatch(raw_cap):
        problem = (
            "Enter a whole number (0 holds the group: none of its jobs start), "
            "or nothing to remove the limit."
        )
        return None, None, problem
    if raw_rate and not COUNT.fullmatch(raw_rate):
        return None, None, "Enter a whole number of starts per rate window, or nothing."
    cap = int(raw_cap) if raw_cap else None
    rate = int(raw_rate) if raw_rate else None
    return cap, rate, ops_queues.group_limit_problem(name, key, cap, rate)


def limit_of(value: int | None, fallback: str) -> str:
    if value == 0:
        return "held: none of its jobs start"
    return f"{value} at a time" if value else f"the queue's per-group limit ({fallback})"


def rate_of(value: int | None, config: Any) -> str:
    if value is not None:
        return f"{value} per {duration(config.rate_window if config else 60)}"
    if config is None or not config.rate_limit_per_key:
        return "the queue's (its rate limit is not per key)"
    return f"the queue's ({shown('count', config.rate_limit)})"


@operator_required
def group_limit(request: HttpRequest, name: str) -> HttpResponse:
    config = queue_context(name)["config"]
    key = request.POST.get("group_key", "")
    raw = request.POST.get("max_concurrency", "").strip()
    raw_rate = request.POST.get("rate_limit", "").strip()
    new, new_rate, problem = group_limit_values(name, key, raw, raw_rate)
    if problem:
        return edit_page(
            request,
            name,
            group_error=problem,
            group_key=key,
            group_value=raw,
            group_rate=raw_rate,
            open_group=True,
        )
    old = GroupLimit.objects.filter(queue=name, group_key=key).first()
    old_limit = old.max_concurrency if old else None
    old_rate = old.rate_limit if old else None
    back = reverse("queue_engine:queue", args=[name])
    if (old_limit, old_rate) == (new, new_rate):
        messages.info(request, f"Nothing changed: group {key} of {name} already has that limit.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        fallback = shown("count", config.group_concurrency if config else None)
        gone = new is None and new_rate is None
        verb = "Remove the limit on" if gone else ("Hold" if new == 0 else "Limit")
        changes = []
        if old_limit != new:
            changes.append(
                Change(f"Group {key}", limit_of(old_limit, fallback), limit_of(new, fallback))
            )
        if old_rate != new_rate:
            changes.append(
                Change(f"Group {key}: rate", rate_of(old_rate, config), rate_of(new_rate, config))
            )
        return confirm_page(
            request,
            name,
            f"{verb} group {key} of {name}?",
            changes,
            action=reverse("queue_engine:queue_group_limit", args=[name]),
            fields=[
                ("group_key", key),
                ("max_concurrency", "" if new is None else str(new)),
                ("rate_limit", "" if new_rate is None else str(new_rate)),
            ],
            explain="Workers apply it from their next claim; running jobs are not stopped.",
        )
    if new is None and new_rate is None:
        done = "removed"
    elif new == 0:
        done = "held: none of its jobs start"
    else:
        done = "set to " + ", ".join(
            said
            for said in (
                None if new is None else f"{new} at a time",
                None if new_rate is None else rate_of(new_rate, config),
            )
            if said
        )
    return applied(
        request,
        back,
        lambda: ops_queues.set_group_limit(name, key, new, rate_limit=new_rate, actor=request.user),
        f"Limit of group {key} in queue {name} {done}.",
    )
