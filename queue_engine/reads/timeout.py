"""The one statement timeout of the console's reads, `CONSOLE_STATEMENT_TIMEOUT`.

Every console page (the middleware), every live update (the consumers) and the
reads (`list_jobs`, `list_flows`, `flow_graph`) run under it. A query past it is
told apart by its SQLSTATE (query_canceled), not by the message's words, which
follow the server's `lc_messages`; it surfaces as `NarrowFilter`, whose message
says what to do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import OperationalError, connection, transaction

from queue_engine import sql
from queue_engine.conf import option
from queue_engine.exceptions import NarrowFilter

__all__ = [
    "limit_session",
    "milliseconds",
    "reset_session",
    "seconds",
    "time_limited",
    "timed_out",
]


def seconds() -> float:
    """The setting as written (3, not 3.0), for messages."""
    value: float = option("CONSOLE_STATEMENT_TIMEOUT")
    return value


def milliseconds() -> str:
    """The timeout as `statement_timeout` takes it (0: none)."""
    return str(int(float(seconds()) * 1000))


def timed_out(exc: BaseException) -> bool:
    """Whether a database error is a statement cancelled for running too long."""
    return isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, psycopg.errors.QueryCanceled
    )


@contextmanager
def time_limited() -> Iterator[None]:
    """Run the block's queries in one transaction under the timeout; past it, NarrowFilter."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql.STATEMENT_TIMEOUT, [milliseconds()])
            yield
    except OperationalError as exc:
        if timed_out(exc):
            raise NarrowFilter from exc
        raise


def limit_session() -> None:
    """The timeout (and no JIT) for the rest of this connection's session: a console request.

    Not through a pooler in transaction mode (DATABASE_DIRECT_URL set): each statement
    may go to another server connection, where a session setting would stay behind for
    whoever gets that connection next. There, the reads under `time_limited` and the
    live updates keep the timeout, and the README's production section says how to bound
    the rest (the pooler's query_timeout, or the web role's statement_timeout)."""
    if _pooled():
        return
    with connection.cursor() as cursor:
        cursor.execute(sql.CONSOLE_SESSION, [milliseconds()])


def reset_session() -> None:
    """The connection's own defaults back (it may go back to a pool)."""
    if _pooled():
        return
    with connection.cursor() as cursor:
        for statement in sql.CONSOLE_SESSION_RESET:
            cursor.execute(statement)


def _pooled() -> bool:
    return bool(connection.settings_dict.get("DIRECT"))
