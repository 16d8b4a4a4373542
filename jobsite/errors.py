"""Turn set-up mistakes (bad DATABASE_URL, server down) into one clear line."""

from __future__ import annotations

import sys
from typing import NoReturn


def run_with_clear_errors(argv: list[str]) -> None:
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(argv)
    except ImproperlyConfigured as exc:
        fail(f"jobsite: configuration error: {exc}")
    except Exception as exc:
        if not is_connection_error(exc):
            raise
        fail(connection_message(exc))


def is_connection_error(exc: BaseException) -> bool:
    import psycopg
    from django.db import OperationalError

    while exc is not None:
        text = str(exc).lower()
        # "failed to resolve host" (a misspelt host name) says neither "connect" nor
        # "connection", but is the same mistake.
        if isinstance(exc, OperationalError | psycopg.OperationalError) and (
            "connect" in text or "resolve host" in text
        ):
            return True
        if type(exc).__name__ == "PoolTimeout":
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def connection_message(exc: BaseException) -> str:
    from django.conf import settings

    from jobsite.database import describe

    config = settings.DATABASES["default"]
    reason = " ".join(str(exc).split())[:300]
    if config.get("SOURCE") == "DATABASE_URL":
        hint = (
            "check that the server is running and that DATABASE_URL has the right host, "
            "port, user, password and database name, or unset DATABASE_URL to use the "
            "embedded Postgres"
        )
    else:
        hint = "run `python -m jobsite.devdb stop` and retry, or delete .data/pg to start afresh"
    return (
        f"jobsite: cannot connect to Postgres at {describe(config)} "
        f"(from {config.get('SOURCE')}): {reason}; {hint}."
    )


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(1)
