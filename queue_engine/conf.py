"""Engine options: `settings.QUEUE_ENGINE`, read through `option(name)` with the defaults
in `DEFAULTS`.

The manual's settings reference (docs/reference/settings.md) lists every key with its
default and meaning, and a test keeps it equal to `DEFAULTS`; the how-to guides say how
`QUEUES`, `QUEUE_DEFAULTS` and `SCHEDULES` are declared. System checks (checks.py) name
a bad value before anything runs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    "DEFAULT_QUEUE": "default",
    "DEFAULT_MAX_ATTEMPTS": 20,
    "MAX_PAYLOAD_BYTES": 1024 * 1024,
    "ALLOW_UNKNOWN_KINDS": False,
    # Enqueue statements as prepared statements on Django's connection (Django itself
    # prepares none): planned once, not on every single enqueue.
    "PREPARED_STATEMENTS": True,
    "QUEUES": {},
    "QUEUE_DEFAULTS": {},
    "ALLOW_UNDECLARED_QUEUES": True,
    "JOB_MODULES": [],
    "LOCK_DURATION": 60,
    "POLL_INTERVAL": 1.0,
    "MAX_RESCUES": 5,
    "SHUTDOWN_TIMEOUT": 30,
    "FLOW_RELEASE_CHUNK": 1000,
    # Case-insensitive words; a payload, result or meta key containing one is shown as "********"
    # (queue_engine.masking has the rules, and masks the password of every URL as well).
    "CONSOLE_MASKED_KEYS": [
        "password",
        "passwd",
        "passphrase",
        "token",
        "secret",
        "key",
        "auth",
        "cookie",
        "credential",
        "signature",
    ],
    # Short words that would match too much inside other words: a key is masked when one
    # of its word parts (split at _ - . digits and camelCase) is one of these.
    "CONSOLE_MASKED_KEY_PARTS": ["pass", "pwd", "pw"],
    "CONSOLE_STATEMENT_TIMEOUT": 3,
    # How console pages update themselves: "websocket" (the host serves
    # `console_websockets()`), "poll" (they reload their changing parts every few
    # seconds), or "auto": websockets when this process serves them, else polling.
    "LIVE_UPDATES": "auto",
    "SCHEDULES": {},
    "METRICS_TOKEN": None,
    "METRICS_FAILURE_LIMIT": 10,
    "METRICS_FAILURE_WINDOW": 60,
    "TRUSTED_PROXIES": [],
    "SIGN_IN_ADDRESS_LIMIT": 100,
    "LOG_FORMAT": "text",
    # Dotted paths of job middleware classes, outermost first (queue_engine.worker.middleware),
    # and of enqueue hooks that add to a job's meta (queue_engine.enqueueing.hooks).
    "JOB_MIDDLEWARE": [],
    "ENQUEUE_MIDDLEWARE": [],
    # Trace context from enqueue to attempt, and a span per attempt, when opentelemetry-api
    # is installed (queue_engine.contrib.otel).
    "OPENTELEMETRY": True,
    # The console's address as users reach it (https://ops.example.com/queue/), for links
    # to a job's page in reports sent elsewhere (queue_engine.contrib.sentry); None: no link.
    "CONSOLE_URL": None,
    "HEALTH_XMIN_AGE": 60,
    "HEALTH_DEAD_ROWS": 100_000,
    # Seconds a leaf of the partitioned history spans; None: a quarter of the longest
    # retention window of its state, from a minute to a day (queue_engine.schema.partitions).
    "HISTORY_PARTITION": None,
    # A NOTIFY on `queue_engine_service` after each step of a leader service, for tests
    # that wait for one (queue_engine.worker.services.runner).
    "SERVICE_EVENTS": False,
}


def configured() -> dict[str, Any]:
    """settings.QUEUE_ENGINE, refused with one clear line when it is not a dict."""
    value = getattr(settings, "QUEUE_ENGINE", None) or {}
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"settings.QUEUE_ENGINE must be a dict of options, not a {type(value).__name__}; "
            "see queue_engine/conf.py for the options and their defaults"
        )
    return value


def snapshot() -> dict[str, Any]:
    """Every option at once, for code that reads several per job (enqueue_many)."""
    return {**DEFAULTS, **configured()}


def option(name: str) -> Any:
    return configured().get(name, DEFAULTS[name])


def is_set(name: str) -> bool:
    """Whether settings give this option, rather than leaving it to its default."""
    return name in configured()


def unknown_options() -> list[str]:
    return sorted(set(configured()) - set(DEFAULTS))
