"""Job kinds declared in code: `@job` registers a function as a `JobKind`, which enqueues."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Protocol, TypedDict, Unpack, overload

from queue_engine.conf import option
from queue_engine.definition.job import (
    DEFAULT_BACKOFF,
    Backoff,
    Call,
    JobDefinition,
    OnError,
    idle_timeout_problem,
    labels_problem,
    max_attempts_problem,
    name_problem,
    priority_problem,
)
from queue_engine.definition.registry import registry
from queue_engine.durations import Seconds, to_seconds
from queue_engine.enqueueing.bulk import enqueue_calls
from queue_engine.enqueueing.single import enqueue_definition
from queue_engine.models import Job

if TYPE_CHECKING:
    from queue_engine.worker.context import JobContext


class JobKind[**P = ..., R = Any](JobDefinition[P, R]):
    """A job kind declared with `@job`: call `.enqueue(...)` to queue it, or call it to run it.

    `P` is the handler's parameters without its `ctx`: a type checker holds `enqueue` and
    `enqueue_debounced` (also after `using(...)`) to them.
    """

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        return enqueue_definition(self, self.payload_for(args, kwargs))

    def enqueue_debounced(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Coalesce with a pending job of the same dedup key: it takes this payload and run time."""
        return enqueue_definition(self, self.payload_for(args, kwargs), debounce=True)

    def enqueue_many(self, calls: Iterable[Call]) -> list[int]:
        """Enqueue one job per item (a dict of keyword arguments, or a tuple of positional ones)."""
        return enqueue_calls(self, calls if isinstance(calls, Sequence) else list(calls))


class JobOptions(TypedDict, total=False):
    """The options of `@job`, as the overloads below take them."""

    kind: str | None
    queue: str | None
    priority: int
    max_attempts: int | None
    backoff: Backoff | None
    idle_timeout: Seconds | None
    name: str | Callable[[dict[str, Any]], str] | None
    group_key: str | Callable[[dict[str, Any]], str | None] | None
    labels: Sequence[str]
    on_error: OnError
    takes_context: bool | None


class JobDecorator(Protocol):
    """What `@job(...)` with options returns: it types the handler as `@job` does."""

    @overload
    def __call__[**P, R](  # type: ignore[overload-overlap]
        self, func: Callable[Concatenate[JobContext, P], R], /
    ) -> JobKind[P, R]: ...

    @overload
    def __call__[**P, R](self, func: Callable[P, R], /) -> JobKind[P, R]: ...


# A handler whose first parameter is typed JobContext is typed without it: its jobs'
# payloads are the rest. The runtime decides by the name `ctx` (or takes_context=), which
# a type checker cannot see: a first parameter typed Any, or untyped, matches both
# overloads, and the kind is then left unchecked (JobKind[Any, Any]) rather than wrong.
@overload
def job[**P, R](  # type: ignore[overload-overlap]
    func: Callable[Concatenate[JobContext, P], R],
    **options: Unpack[JobOptions],
) -> JobKind[P, R]: ...


@overload
def job[**P, R](
    func: Callable[P, R],
    **options: Unpack[JobOptions],
) -> JobKind[P, R]: ...


@overload
def job(
    func: None = None,
    **options: Unpack[JobOptions],
) -> JobDecorator: ...


def job(
    func: Callable[..., Any] | None = None,
    *,
    kind: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    backoff: Backoff | None = None,
    idle_timeout: Seconds | None = None,
    name: str | Callable[[dict[str, Any]], str] | None = None,
    group_key: str | Callable[[dict[str, Any]], str | None] | None = None,
    labels: Sequence[str] = (),
    on_error: OnError = "retry",
    takes_context: bool | None = None,
) -> JobKind[..., Any] | Callable[[Callable[..., Any]], JobKind[..., Any]]:
    """Register a function (plain or `async def`) as a job kind.

    The handler receives a `ctx` (JobContext) as its first argument when that
    parameter is named `ctx`, or when `takes_context=True`.
    """

    def register(f: Callable[..., Any]) -> JobKind[..., Any]:
        name_of_kind = kind or f"{f.__module__}.{f.__qualname__}"
        problems = [
            name_problem("the kind", name_of_kind, 255),
            None if queue is None else name_problem("the queue", queue, 128),
            None
            if on_error in ("retry", "fatal")
            else f"on_error must be 'retry' or 'fatal', not {on_error!r}.",
            priority_problem(priority),
            None if max_attempts is None else max_attempts_problem(max_attempts),
            labels_problem(labels),
            None if idle_timeout is None else idle_timeout_problem(idle_timeout),
            None
            if backoff is None or isinstance(backoff, Backoff)
            else f"backoff must be a Backoff, such as Backoff.fixed(30), not {backoff!r}.",
        ]
        for problem in problems:
            if problem is not None:
                raise ValueError(f"@job {name_of_kind}: {problem}")
        params = list(inspect.signature(f).parameters)
        wants_ctx = takes_context if takes_context is not None else params[:1] == ["ctx"]
        definition = JobKind(
            func=f,
            kind=name_of_kind,
            queue=queue or option("DEFAULT_QUEUE"),
            priority=priority,
            max_attempts=option("DEFAULT_MAX_ATTEMPTS") if max_attempts is None else max_attempts,
            backoff=backoff or DEFAULT_BACKOFF,
            idle_timeout=to_seconds(idle_timeout),
            name=name,
            group_key=group_key,
            labels=tuple(labels),
            on_error=on_error,
            takes_context=wants_ctx,
        )
        registry.register(definition)
        return definition

    if func is not None:
        return register(func)
    return register
