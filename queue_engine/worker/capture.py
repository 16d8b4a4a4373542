"""Route what a running job prints or logs into its JobLog, by context variable.

Installed once per worker process: sys.stdout/sys.stderr become proxies that
write to the current job's log when one is running in this task or thread,
and to the real stream otherwise.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution

CURRENT: contextvars.ContextVar[Execution | None] = contextvars.ContextVar(
    "queue_engine_current_job", default=None
)


class StreamProxy:
    def __init__(self, stream: str, original: TextIO) -> None:
        self._stream = stream
        self._original = original

    def write(self, text: str) -> int:
        execution = CURRENT.get()
        if execution is None:
            return self._original.write(text)
        execution.write_stream(self._stream, text)
        return len(text)

    def flush(self) -> None:
        if CURRENT.get() is None:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class JobLogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        execution = CURRENT.get()
        if execution is None or record.name.startswith("queue_engine.worker"):
            return
        try:
            execution.write_log("log", self.format(record), level=record.levelname.lower())
        except Exception:  # pragma: no cover - logging must never break a job
            self.handleError(record)


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    sys.stdout = StreamProxy("stdout", sys.stdout)  # type: ignore[assignment]
    sys.stderr = StreamProxy("stderr", sys.stderr)  # type: ignore[assignment]
    handler = JobLogHandler(level=logging.INFO)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
