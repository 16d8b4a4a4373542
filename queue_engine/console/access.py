"""Who may see and who may act: checked on every view, server side."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from queue_engine.console.roles import OPERATE, VIEW

View = Callable[..., HttpResponse]


def forbidden(request: HttpRequest, needed: str) -> HttpResponse:
    return render(request, "console/forbidden.html", {"needed": needed}, status=403)


def viewer_required(view: View) -> View:
    """Any console page: the user needs the viewer role (or more)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(VIEW):
            return forbidden(request, "viewer")
        return view(request, *args, **kwargs)

    return wrapped


def operator_required(view: View) -> View:
    """An action: POST only, and the user needs the operator role."""

    @require_POST
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not (request.user.has_perm(VIEW) and request.user.has_perm(OPERATE)):
            return forbidden(request, "operator")
        return view(request, *args, **kwargs)

    return wrapped
