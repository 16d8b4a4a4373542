"""The worker's own log (queue_engine.worker): one stderr handler, for a worker or a
supervisor, in text or in JSON lines; and the line each finished job gets at -v 2."""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    from queue_engine.worker.execution import Outcome

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT = "%(asctime)s %(levelname)s %(message)s"

# The fields of a JSON line beyond time, level, logger and message, each present only
# when the record carries it: stable names a log pipeline can index on.
JOB_FIELDS = ("job_id", "kind", "queue", "attempt", "worker")
FINISHED_FIELDS = ("outcome", "run_time", "wait_time")
TRACE_FIELDS = ("trace_id", "span_id")

jobs_log = logging.getLogger("queue_engine.worker.jobs")


class JsonLines(logging.Formatter):
    """One JSON object a line: time (ISO 8601, UTC), level, logger, message, the job's
    fields when they apply, and the traceback as `exception`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in JOB_FIELDS + FINISHED_FIELDS + TRACE_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if "trace_id" not in line and "opentelemetry.trace" in sys.modules:
            line.update(current_trace())
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["exception"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def current_trace() -> dict[str, str]:
    """The current OpenTelemetry span's trace and span ids, when there is a valid one."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonLines() if log_format == "json" else logging.Formatter(TEXT)


def configure_logging(verbosity: int, log_format: LogFormat = "text") -> None:
    logger = logging.getLogger("queue_engine.worker")
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(sys.__stderr__))
    for handler in logger.handlers:
        handler.setFormatter(formatter(log_format))
    logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    logger.propagate = False
    jobs_log.setLevel(logging.INFO if verbosity > 1 else logging.WARNING)
    if log_format == "json":
        # Every line the process writes to its terminal, not only the worker's own
        # (Django's, the engine's, the application's): a log pipeline reads one format.
        # Handlers that are not streams (the jobs' own logs, files, mail) keep theirs.
        loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
        for each in loggers:
            for handler in getattr(each, "handlers", []):
                if type(handler) is logging.StreamHandler:
                    handler.setFormatter(JsonLines())


def chosen_format(flag: str | None) -> LogFormat:
    """--log-format, else QUEUE_ENGINE['LOG_FORMAT'] (the system check vouches for it)."""
    from queue_engine.conf import option

    return cast(LogFormat, flag or option("LOG_FORMAT"))


def report_finished(outcomes: list[Outcome]) -> None:
    """One line per finished job (-v 2): kind, id, outcome, run time and wait time."""
    if not jobs_log.isEnabledFor(logging.INFO):
        return
    from queue_engine.contrib.otel import trace_id_of

    now = time.time()
    for outcome in outcomes:
        execution = outcome.execution
        run_time = round(now - execution.claimed_at, 4)
        wait_time = round(max(execution.claimed_at - execution.run_at.timestamp(), 0.0), 4)
        jobs_log.info(
            "job %d %s %s: ran %.3f s, waited %.3f s (queue %s, attempt %d)",
            execution.job_id,
            execution.kind,
            outcome.kind,
            run_time,
            wait_time,
            execution.queue,
            execution.attempt,
            extra={
                "job_id": execution.job_id,
                "kind": execution.kind,
                "queue": execution.queue,
                "attempt": execution.attempt,
                "worker": execution.worker_id,
                "outcome": outcome.kind,
                "run_time": run_time,
                "wait_time": wait_time,
                "trace_id": trace_id_of(execution.meta),
            },
        )
