"""Engine options: `settings.QUEUE_ENGINE`, with these defaults.

| key                      | default      | meaning                                                   |
|--------------------------|--------------|-----------------------------------------------------------|
| DEFAULT_QUEUE            | "default"    | queue of a job whose definition names none                |
| DEFAULT_MAX_ATTEMPTS     | 20           | attempts before a failing job is dead-lettered            |
| MAX_PAYLOAD_BYTES        | 1048576      | largest payload accepted at enqueue (serialised JSON)     |
| ALLOW_UNKNOWN_KINDS      | False        | accept enqueues of kinds not registered in this process   |
| QUEUES                   | {}           | settings per queue: {"emails": {"max_concurrency": 5}} (below) |
| QUEUE_DEFAULTS           | {}           | settings of every queue, where its QUEUES entry has none (below) |
| ALLOW_UNDECLARED_QUEUES  | True         | False: enqueue only into queues named in QUEUES           |
| JOB_MODULES              | []           | modules imported at start-up so their @job kinds register |
| LOCK_DURATION            | 60           | seconds a claim's lease lasts without a heartbeat: when set, the lock_duration of queues QUEUES and QUEUE_DEFAULTS give none (rounded up) |
| POLL_INTERVAL            | 1.0          | seconds between polls when no notification arrives        |
| MAX_RESCUES              | 5            | expired leases before a job is dead-lettered (poison job) |
| SHUTDOWN_TIMEOUT         | 30           | seconds running jobs get to finish on SIGTERM             |
| FLOW_RELEASE_CHUNK       | 1000         | children of one flow node a settle counts down at once; the rest follow in chunks this size while the first run |
| CONSOLE_MASKED_KEYS      | ["password", "token", "secret", "key", "auth", ...] | the console masks values whose key contains one of these words (any case) |
| CONSOLE_STATEMENT_TIMEOUT | 3          | seconds a console or tracking query may run before the page asks to narrow the filter |
| SCHEDULES                | {}           | recurring jobs declared when a worker starts (below)      |
| HEALTH_XMIN_AGE          | 60           | seconds after which an open transaction (or prepared one, or a replication slot) that holds back vacuum is named on the overview |
| HEALTH_DEAD_ROWS         | 100000       | dead rows in the live job table (and more than its live ones) from which the overview warns |
| LOG_FORMAT               | "text"       | how `runworker` writes its log: "text", or "json" (one JSON object a line: time, level, logger, message, and job_id, kind, queue, attempt, worker when they apply); `runworker --log-format` overrides it |
| METRICS_TOKEN            | None         | set: GET /metrics answers Prometheus, to requests that send `Authorization: Bearer <token>`; unset: /metrics is off (404) |

SCHEDULES maps a unique name to a schedule, declared idempotently by every
worker at start-up (`queue_engine.schedules.declare_configured`); a schedule
declared from settings and later removed from them is removed too:

    "SCHEDULES": {
        "nightly-report": {"kind": "reports.jobs.build", "cron": "0 3 * * *",
                           "timezone": "Europe/Paris", "payload": {"full": True}},
        "ping": {"kind": "app.jobs.ping", "every": 30},   # seconds, or a timedelta
    }

Optional keys: queue, priority, enabled, missed ("run_once", the default, or "skip").

QUEUES and QUEUE_DEFAULTS give queues their settings (QueueConfig rows), with the
keyword names of `ops_queues.update_queue_config`: paused, max_concurrency,
rate_limit (job starts per rate_window seconds), rate_window, lock_duration
(seconds), group_concurrency, retain_succeeded, retain_failed, retain_cancelled
(seconds); None means "no limit" for the three concurrency and rate limits:

    "QUEUE_DEFAULTS": {"retain_succeeded": 3600},
    "QUEUES": {
        "emails": {"max_concurrency": 5, "rate_limit": 100, "rate_window": 60},
        "reports": {"lock_duration": 600, "group_concurrency": 1, "paused": True},
    },

A field a QUEUES entry leaves out comes from QUEUE_DEFAULTS, then from the model
(not paused, no limits, 60 s windows and lease, retention 1, 7 and 1 days).
- A new queue starts with these values, whether an enqueue, an operator or a
  worker creates its row. Every worker start and every `migrate` creates the
  rows of the queues QUEUES names, and writes QUEUE_DEFAULTS where the enqueue
  trigger finds them (QueueDefaults: Postgres cannot read Django settings).
- Each start and migrate also sets, on every existing queue, the fields that
  settings name (a deploy that changes them takes effect), except the fields an
  operator changed through ops, the console or the admin: those are listed in
  the row's `edited_fields`, and settings leave them alone, restarts included,
  until `ops_queues.reset_queue_config` hands them back. Fields settings do not
  name are never touched (remove a field from settings and the queue keeps its
  value). Every change is audited, by "settings" or by the operator.
- Bad values fail the system check (queue_engine.E021) with a message naming
  the queue and the field, and nothing is written from them.
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
    # Case-insensitive words; a payload, result or meta key containing one is shown as "********".
    "CONSOLE_MASKED_KEYS": [
        "password",
        "passwd",
        "token",
        "secret",
        "key",
        "auth",
        "cookie",
        "credential",
        "signature",
    ],
    "CONSOLE_STATEMENT_TIMEOUT": 3,
    "SCHEDULES": {},
    "METRICS_TOKEN": None,
    "LOG_FORMAT": "text",
    "HEALTH_XMIN_AGE": 60,
    "HEALTH_DEAD_ROWS": 100_000,
    # Seconds a leaf of the partitioned history spans; None: a quarter of the longest
    # retention window of its state, from a minute to a day (queue_engine.history).
    "HISTORY_PARTITION": None,
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
