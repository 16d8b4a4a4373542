"""Who may see and who may act, whether what they sent can be read, and how long its
queries may run: checked on every view, server side, so that the console needs no
middleware of the host's beyond Django's defaults.

Every console page's queries run under CONSOLE_STATEMENT_TIMEOUT (`statement_timeout`).
A page whose queries run past it answers 503 with a page that says what to do (narrow
the filter, or a shorter time window) rather than a bare 500, and the connection gets
its default timeout back whatever happened (it may go back to a pool). Lists and
confirmations that show the message on their own page catch `NarrowFilter` themselves.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render, resolve_url
from django.urls import NoReverseMatch, Resolver404, resolve, reverse
from django.views.decorators.http import require_POST

from queue_engine.console import inputs
from queue_engine.console.roles import OPERATE, VIEW
from queue_engine.exceptions import NarrowFilter
from queue_engine.reads import timeout as statement_timeout

log = logging.getLogger(__name__)

View = Callable[..., HttpResponse]


def forbidden(request: HttpRequest, needed: str) -> HttpResponse:
    return render(request, "queue_engine/forbidden.html", {"needed": needed}, status=403)


def refused(request: HttpRequest, problem: str) -> HttpResponse:
    path = request.path
    clear = (
        path if request.method == "GET" and request.GET and inputs.postgres_can_hold(path) else ""
    )
    return render(
        request, "queue_engine/bad_input.html", {"problem": problem, "clear": clear}, status=400
    )


def login_url() -> str:
    """The host's LOGIN_URL when it leads somewhere, else the console's own sign-in page
    (a project made with `startproject` names /accounts/login/ and serves nothing there)."""
    url = resolve_url(settings.LOGIN_URL)
    try:
        resolve(url.split("?", 1)[0])
    except Resolver404:
        with contextlib.suppress(NoReverseMatch):
            return reverse("queue_engine:login")
    return url


def time_limited(view: View) -> View:
    """The view's queries under CONSOLE_STATEMENT_TIMEOUT; past it, a 503 page that says
    what to do."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        statement_timeout.limit_session()
        try:
            return view(request, *args, **kwargs)
        except Exception as exc:
            if not (isinstance(exc, NarrowFilter) or statement_timeout.timed_out(exc)):
                raise
            log.warning(
                "console %s: a query ran past CONSOLE_STATEMENT_TIMEOUT (%ss); answered 503",
                request.path,
                statement_timeout.seconds(),
            )
            return render(
                request,
                "queue_engine/timeout.html",
                {"seconds": statement_timeout.seconds()},
                status=503,
            )
        finally:
            with contextlib.suppress(DatabaseError):
                statement_timeout.reset_session()

    return wrapped


def readable(view: View) -> View:
    """Refuse a request carrying text Postgres cannot hold before the view reads it."""
    limited = time_limited(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        problem = inputs.unstorable(request, kwargs)
        if problem:
            return refused(request, problem)
        return limited(request, *args, **kwargs)

    return wrapped


def viewer_required(view: View) -> View:
    """Any console page: the user signs in first, then needs the viewer role (or more)."""
    checked = readable(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url())
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
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url())
        if not (request.user.has_perm(VIEW) and request.user.has_perm(OPERATE)):
            return forbidden(request, "operator")
        return checked(request, *args, **kwargs)

    return wrapped
