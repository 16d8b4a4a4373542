"""Every console page's queries run under CONSOLE_STATEMENT_TIMEOUT (`statement_timeout`).

A page whose queries run past it answers 503 with a page that says what to do
(narrow the filter, or a shorter time window) rather than a bare 500, and the
connection gets its default timeout back whatever happened (it may go back to
a pool). Lists and confirmations that show the message on their own page catch
`NarrowFilter` themselves.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.exceptions import NarrowFilter
from queue_engine.reads import timeout as statement_timeout

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
                with contextlib.suppress(DatabaseError):
                    statement_timeout.reset_session()

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> None:
        match = request.resolver_match
        if match is None or match.app_name != "console":
            return
        statement_timeout.limit_session()
        setattr(request, TIMED, True)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not getattr(request, TIMED, False):
            return None
        if not (isinstance(exc, NarrowFilter) or statement_timeout.timed_out(exc)):
            return None
        log.warning(
            "console %s: a query ran past CONSOLE_STATEMENT_TIMEOUT (%ss); answered 503",
            request.path,
            statement_timeout.seconds(),
        )
        return render(
            request, "console/timeout.html", {"seconds": statement_timeout.seconds()}, status=503
        )
