"""Turn DATABASE_URL (or the embedded Postgres) into Django's DATABASES entry."""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured


def database_config(
    url: str | None, *, pool: bool, direct_url: str | None = None
) -> dict[str, Any]:
    """Django's entry for DATABASE_URL. With `direct_url` (DATABASE_DIRECT_URL), DATABASE_URL
    is a pooler in transaction mode (PgBouncer's `pool_mode = transaction`), which may
    hand each transaction to another server connection: Django's queries go through it
    without server-side cursors, and the entry's DIRECT part is where the connections
    that need a session of their own go (LISTEN, advisory locks, prepared statements):
    the workers' and the console's listener (queue_engine.connections.conninfo)."""
    config = _parse(url, "DATABASE_URL", embedded=True)
    if direct_url:
        direct = _parse(direct_url, "DATABASE_DIRECT_URL", embedded=False)
        config["DIRECT"] = {k: direct[k] for k in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}
        config["DIRECT"]["OPTIONS"] = direct["OPTIONS"]
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
    if pool:
        config["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 20, "timeout": 10}
    return config


def _parse(url: str | None, source: str, *, embedded: bool) -> dict[str, Any]:
    if not url and embedded:
        from jobsite.devdb import embedded_url

        url, source = embedded_url(), "the embedded Postgres"
    if not url or not url.startswith(("postgres://", "postgresql://", "pgsql://")):
        raise ImproperlyConfigured(
            f"{source} must be a postgresql:// URL, not {redact(url or '')!r}; "
            "for example postgresql://user:password@127.0.0.1:5432/dbname, "
            + (
                "or unset it to use the embedded Postgres."
                if embedded
                else "or unset it if DATABASE_URL is not a pooler in transaction mode."
            )
        )
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{source} {redact(url)!r} is not a valid URL: {exc}") from exc
    options = config.setdefault("OPTIONS", {})
    if "host" in options:  # a socket directory given as ?host=/path
        config["HOST"] = options.pop("host")
    config["CONN_MAX_AGE"] = 0
    config["SOURCE"] = source
    return config


def redact(url: str) -> str:
    """The URL with any password replaced, safe for error messages."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable>"
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def describe(config: dict[str, Any]) -> str:
    host = config.get("HOST") or "local socket"
    port = f":{config['PORT']}" if config.get("PORT") else ""
    return f"{config.get('USER') or ''}@{host}{port}/{config.get('NAME')}"
