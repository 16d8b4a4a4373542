"""What an enqueue adds to each job's meta: the trace context of the current span
(queue_engine.contrib.otel), and what QUEUE_ENGINE['ENQUEUE_MIDDLEWARE'] hooks return.

Hooks run in the enqueuing call, on its thread and in its transaction, once a job, before
the row is written; the keys the caller gave in `meta` win over a hook's. A hook that
raises is logged and left out: the job is enqueued all the same.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

log = logging.getLogger("queue_engine.enqueue")


@dataclass(frozen=True, slots=True)
class EnqueueContext:
    """What an enqueue hook is shown of the job about to be written (read-only)."""

    kind: str
    queue: str
    payload: Mapping[str, Any]
    meta: Mapping[str, Any]


type EnqueueHook = Callable[[EnqueueContext], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class Hooks:
    hooks: tuple[tuple[str, EnqueueHook], ...]
    tracing: bool  # OpenTelemetry's API is installed and QUEUE_ENGINE['OPENTELEMETRY'] is on

    @property
    def active(self) -> bool:
        return bool(self.hooks) or (self.tracing and _otel().recording_context())


@functools.cache
def _otel() -> Any:
    from queue_engine.contrib import otel

    return otel


_resolved: Hooks | None = None


def resolved() -> Hooks:
    """The process's hooks, resolved once (again when the settings change)."""
    global _resolved
    if _resolved is None:
        from queue_engine.conf import option

        hooks = []
        for path in option("ENQUEUE_MIDDLEWARE"):
            try:
                hooks.append((path, import_string(path)))
            except ImportError:
                log.exception("enqueue middleware %s cannot be imported; it is left out", path)
        tracing = bool(option("OPENTELEMETRY")) and _otel().installed()
        _resolved = Hooks(tuple(hooks), tracing)
    return _resolved


def additions(
    kind: str, queue: str, payload: Mapping[str, Any], meta: Mapping[str, Any]
) -> dict[str, Any] | None:
    """What the job's meta gains (None: nothing), for `build_row`."""
    found = resolved()
    added: dict[str, Any] | None = None
    if found.tracing:
        carrier = _otel().current_carrier()
        if carrier:
            added = dict(carrier)
    if found.hooks:
        shown = EnqueueContext(kind, queue, MappingProxyType(payload), MappingProxyType(meta))
        for path, hook in found.hooks:
            try:
                extra = hook(shown)
                if extra:
                    added = {**(added or {}), **extra}
            except Exception:
                log.exception(
                    "enqueue middleware %s raised for a %s job; it adds nothing to its meta",
                    path,
                    kind,
                )
    return added


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    global _resolved
    if setting == "QUEUE_ENGINE":
        _resolved = None


def producing[**P, R](
    name_of: Callable[..., str],
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run an enqueue function inside a PRODUCER span when a tracer records spans: its
    jobs' meta then carries that span's context (`additions`)."""

    def wrap(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            if not resolved().tracing or not _otel().tracing():
                return func(*args, **kwargs)
            with _otel().producer(name_of(*args, **kwargs)) as span:
                result = func(*args, **kwargs)
                _otel().sent(span, result)
                return result

        return traced

    return wrap
