"""Signals to jobs that wait for them (`ctx.wait_for_signal`)."""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from queue_engine import sql
from queue_engine.exceptions import PayloadError, SignalError
from queue_engine.payloads import dump_json


def check_name(name: object) -> str:
    """A signal's name as given, or SignalError."""
    if not isinstance(name, str) or not name or len(name) > 200:
        raise SignalError(f"a signal's name must be a string of 1 to 200 characters, not {name!r}")
    return name


def send_signal(
    job_id: int, name: str, payload: Any = None, *, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Send the signal `name`, with a JSON `payload`, to the live job `job_id`; returns the
    signal's id.

    A statement on Django's connection, so in the caller's transaction: the job sees the
    signal only when that commits, and never if it rolls back. A job parked waiting for
    this name is woken at the commit; a job that does not wait for it yet finds it in its
    mailbox when it does. Raises `SignalError`, writing nothing, for an id that names no
    live job (it ended, or never existed), a bad name or a payload that is not JSON.
    """
    check_name(name)
    try:
        text = dump_json(payload, what=f"the payload of signal {name!r}")
    except PayloadError as exc:
        raise SignalError(str(exc)) from None
    params: dict[str, int | str] = {"job": int(job_id), "name": name, "payload": text}
    # The mailbox lock must come in a statement before the signal's, in one transaction
    # (a savepoint in the caller's): it is held to the end of the caller's.
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(sql.LOCK_MAILBOX, params)
        cursor.execute(sql.SEND_SIGNAL, params)
        row = cursor.fetchone()
        if row is None:
            raise SignalError(
                f"job {job_id} is not live (it ended, or never existed): signal {name!r} "
                "was not sent; signal a job that is still queued, running or parked."
            )
    return int(row[0])
