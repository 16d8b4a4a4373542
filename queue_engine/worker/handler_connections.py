"""The Django connections of the handler threads, between one job and the next.

A handler thread keeps its connection from job to job (runworker sets CONN_MAX_AGE), as
a Django request thread would, and tidies it after each job as `close_old_connections`
does: closed after an error it cannot recover from, with autocommit left off, or past its
age. Django's health check (CONN_HEALTH_CHECKS) would then send a `SELECT 1` before each
job's first query, a second round trip for a one-statement job. A connection that has
waited idle between two jobs has nothing to read unless the server closed it (a restart,
a terminated backend, a pooler's timeout) or sent a notice: before a job, its socket is
polled, and only a connection with something to read gets Django's health check, which
reconnects if it failed. With Django's pool (OPTIONS "pool"), the connection goes back
to the pool after each job instead, where other threads need it.
"""

from __future__ import annotations

import select

# (`health_check_done` is Django's, on every connection; django-stubs does not declare it,
# hence the type ignores.)


def check_connections() -> None:
    """Before a job: have Django check the connections that may have been closed."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        if raw is None or not conn.health_check_done:  # type: ignore[attr-defined]
            continue
        try:
            poll = select.poll()
            poll.register(raw.fileno(), select.POLLIN)
            readable = bool(poll.poll(0))
        except (OSError, ValueError, AttributeError):
            readable = True  # no socket to look at: let Django see for itself
        if readable:
            # Checked (and reconnected) at its first use.
            conn.health_check_done = False  # type: ignore[attr-defined]


def tidy_connections() -> None:
    """After a job: close what `close_old_connections` would, keep the rest as checked."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.settings_dict["OPTIONS"].get("pool"):
            conn.close()  # back to the pool
            continue
        conn.close_if_unusable_or_obsolete()
        if conn.connection is not None:
            # Used and still good; check_connections decides whether the next job
            # needs Django's health check.
            conn.health_check_done = True  # type: ignore[attr-defined]
