"""Queue configuration rows: created with the configured defaults, saved defaults."""

_QUEUE_SETTINGS = """paused, max_concurrency, rate_limit, rate_window, lock_duration,
       group_concurrency, retain_succeeded, retain_failed, retain_cancelled,
       rate_limit_per_key, fair_share"""


_QUEUE_VALUES = """%(paused)s, %(max_concurrency)s, %(rate_limit)s, %(rate_window)s,
       %(lock_duration)s, %(group_concurrency)s, %(retain_succeeded)s, %(retain_failed)s,
       %(retain_cancelled)s, %(rate_limit_per_key)s, %(fair_share)s"""


# A queue's settings row, created with the values settings give it if no job has used
# the queue yet; an existing row is left as it is.
ENSURE_QUEUE_CONFIG = f"""
INSERT INTO queue_engine_queueconfig (name, {_QUEUE_SETTINGS})
VALUES (%(name)s, {_QUEUE_VALUES})
ON CONFLICT (name) DO NOTHING
"""


# The values a queue first seen by an enqueue starts with (the enqueue trigger copies
# them: it cannot read Django settings); one row, replaced at worker start and migrate.
SAVE_QUEUE_DEFAULTS = f"""
INSERT INTO queue_engine_queuedefaults (id, {_QUEUE_SETTINGS})
VALUES (1, {_QUEUE_VALUES})
ON CONFLICT (id) DO UPDATE
   SET paused = EXCLUDED.paused, max_concurrency = EXCLUDED.max_concurrency,
       rate_limit = EXCLUDED.rate_limit, rate_window = EXCLUDED.rate_window,
       lock_duration = EXCLUDED.lock_duration, group_concurrency = EXCLUDED.group_concurrency,
       fair_share = EXCLUDED.fair_share,
       retain_succeeded = EXCLUDED.retain_succeeded, retain_failed = EXCLUDED.retain_failed,
       retain_cancelled = EXCLUDED.retain_cancelled,
       rate_limit_per_key = EXCLUDED.rate_limit_per_key, updated_at = now()
"""
