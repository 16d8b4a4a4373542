"""Every console page's queries run under CONSOLE_STATEMENT_TIMEOUT.

A page whose queries run past it answers 503 with a page that says what to do
(narrow the filter, or a shorter time window) rather than a bare 500, and the
connection gets its default timeout back whatever happened (it may go back to
a pool). Confirmations and the jobs list also time-limit their own queries
(`queries.time_limited`) to turn a timeout into a message on the same page.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.conf import option

log = logging.getLogger(__name__)

TIMED = "_queue_engine_statement_timeout"


class ConsoleStatementTimeout:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        finally:
            if getattr(request, TIMED, False):
                with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                    cursor.execute("RESET statement_timeout")
                    cursor.execute("RESET jit")

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> None:
        match = request.resolver_match
        if match is None or match.app_name != "console":
            return
        milliseconds = int(float(option("CONSOLE_STATEMENT_TIMEOUT")) * 1000)
        # JIT off as well: it compiles any plan its estimate calls expensive, which a
        # console query over a big table's guessed row counts can be, and compiling
        # takes longer than these queries run (the workers turn it off for the same
        # reason, worker/store.py).
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('jit', 'off', false)",
                [str(milliseconds)],
            )
        setattr(request, TIMED, True)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not getattr(request, TIMED, False) or not isinstance(exc, OperationalError):
            return None
        if "statement timeout" not in str(exc):
            return None
        log.warning(
            "console %s: a query ran past CONSOLE_STATEMENT_TIMEOUT (%ss); answered 503",
            request.path,
            option("CONSOLE_STATEMENT_TIMEOUT"),
        )
        return render(
            request,
            "console/timeout.html",
            {"seconds": option("CONSOLE_STATEMENT_TIMEOUT")},
            status=503,
        )
