"""Turn DATABASE_URL (or the embedded Postgres) into Django's DATABASES entry."""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured


def database_config(url: str | None, *, pool: bool) -> dict[str, Any]:
    source = "DATABASE_URL"
    if not url:
        from jobsite.devdb import embedded_url

        url, source = embedded_url(), "the embedded Postgres"
    if not url.startswith(("postgres://", "postgresql://", "pgsql://")):
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a postgresql:// URL, not {redact(url)!r}; "
            "for example postgresql://user:password@127.0.0.1:5432/dbname, "
            "or unset it to use the embedded Postgres."
        )
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url))
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"DATABASE_URL {redact(url)!r} is not a valid URL: {exc}"
        ) from exc
    options = config.setdefault("OPTIONS", {})
    if "host" in options:  # a socket directory given as ?host=/path
        config["HOST"] = options.pop("host")
    config["CONN_MAX_AGE"] = 0
    if pool:
        options["pool"] = {"min_size": 1, "max_size": 20, "timeout": 10}
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
