"""Who may see and who may act, and whether what they sent can be read: checked on
every view, server side."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from queue_engine.console import inputs
from queue_engine.console.roles import OPERATE, VIEW

View = Callable[..., HttpResponse]


def forbidden(request: HttpRequest, needed: str) -> HttpResponse:
    return render(request, "console/forbidden.html", {"needed": needed}, status=403)


def refused(request: HttpRequest, problem: str) -> HttpResponse:
    path = request.path
    clear = (
        path if request.method == "GET" and request.GET and inputs.postgres_can_hold(path) else ""
    )
    return render(
        request, "console/bad_input.html", {"problem": problem, "clear": clear}, status=400
    )


def readable(view: View) -> View:
    """Refuse a request carrying text Postgres cannot hold before the view reads it."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        problem = inputs.unstorable(request, kwargs)
        if problem:
            return refused(request, problem)
        return view(request, *args, **kwargs)

    return wrapped


def viewer_required(view: View) -> View:
    """Any console page: the user needs the viewer role (or more)."""
    checked = readable(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(VIEW):
            return forbidden(request, "viewer")
        return checked(request, *args, **kwargs)

    return wrapped


def operator_required(view: View) -> View:
    """An action: POST only, and the user needs the operator role."""
    checked = readable(view)

    @require_POST
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not (request.user.has_perm(VIEW) and request.user.has_perm(OPERATE)):
            return forbidden(request, "operator")
        return checked(request, *args, **kwargs)

    return wrapped
