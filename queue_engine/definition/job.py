"""What a job kind is: `JobDefinition` (its options, checked), `Backoff`, and the option
checks that `@job` (`decorator.py`), `.using()` and enqueue share. The errors a handler
raises live in `queue_engine.exceptions`; the kinds a process knows, in `registry.py`."""

from __future__ import annotations

import dataclasses
import inspect
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, Self, TypeIs

from queue_engine.durations import Seconds, to_seconds
from queue_engine.payloads import text_problem

# One item of `enqueue_many`: keyword arguments, or positional ones.
Call = Mapping[str, Any] | tuple[Any, ...]
OnError = Literal["retry", "fatal"]


# --- option checks: each returns why a value is refused, or None ------------------------
# Shared by @job (ValueError), .using() and enqueue (EnqueueError), which prefix the kind.

# The latest run_at a job may have: Python's datetime ends with the year 9999, and a day
# short of that leaves room for any time zone (and clock skew) when it is read back.
LATEST_RUN_AT = datetime(9999, 12, 31, tzinfo=UTC)
INT4_MAX = 2**31 - 1  # max_attempts is an integer column
LABEL_MAX = 64  # labels is a varchar(64)[] column


def is_whole_number(value: object) -> TypeIs[int]:
    """An int, but not a bool (True is not a count of attempts or a priority)."""
    return isinstance(value, int) and not isinstance(value, bool)


def priority_problem(value: object) -> str | None:
    if is_whole_number(value) and -100 <= value <= 100:
        return None
    return f"priority must be a whole number from -100 to 100 (higher runs first), not {value!r}."


def max_attempts_problem(value: object) -> str | None:
    if not is_whole_number(value) or value < 1:
        return (
            "max_attempts must be a whole number of at least 1 (1 means no retries), "
            f"not {value!r}."
        )
    if value > INT4_MAX:
        return f"max_attempts must be at most {INT4_MAX}, not {value!r}."
    return None


def name_problem(what: str, value: object, longest: int) -> str | None:
    """Why `value` cannot be stored as a name (a kind, a queue) of up to `longest`
    characters, or None."""
    if not isinstance(value, str) or not 0 < len(value) <= longest:
        return f"{what} must be a name of 1 to {longest} characters, not {value!r}."
    problem = text_problem(value)
    return None if problem is None else f"{what} {value!r} {problem}"


def labels_problem(value: object) -> str | None:
    if isinstance(value, str):
        return f"labels must be a list of strings, not the string {value!r}; pass [{value!r}]."
    if not isinstance(value, list | tuple):
        return f"labels must be a list of strings, not a {type(value).__name__} ({value!r})."
    for label in value:
        if not isinstance(label, str) or not 0 < len(label) <= LABEL_MAX:
            return f"each label must be a string of 1 to {LABEL_MAX} characters, not {label!r}."
        problem = text_problem(label)
        if problem is not None:
            return f"the label {label!r} {problem}"
    return None


def seconds_of(name: str, value: object) -> float | str:
    """`value` (a number or a timedelta) in seconds, or why it is not a finite number
    of seconds."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
        return f"{name} must be a finite number of seconds, not {value!r}."
    return f"{name} must be a number of seconds or a timedelta, not {value!r}."


def delay_problem(value: object) -> str | None:
    seconds = seconds_of("delay", value)
    if isinstance(seconds, str):
        return seconds
    if seconds < 0:
        return f"delay must not be negative, not {seconds:g} seconds."
    try:
        too_far = datetime.now(UTC) + timedelta(seconds=seconds) > LATEST_RUN_AT
    except OverflowError:
        too_far = True
    if too_far:
        return (
            f"a delay of {seconds:g} seconds runs the job after {LATEST_RUN_AT:%Y-%m-%d %H:%M} "
            "UTC, the latest time a job can have; pass a shorter delay."
        )
    return None


def run_at_problem(value: object) -> str | None:
    example = "for example django.utils.timezone.now() + timedelta(minutes=5)"
    if not isinstance(value, datetime):
        hint = " (a date has no time of day)" if isinstance(value, date) else ""
        return f"run_at must be an aware datetime, not a {type(value).__name__}{hint}; {example}."
    if value.utcoffset() is None:
        return f"run_at {value.isoformat()} has no time zone; pass an aware datetime, {example}."
    if value > LATEST_RUN_AT:
        return (
            f"run_at {value.isoformat()} is after {LATEST_RUN_AT:%Y-%m-%d %H:%M} UTC, the "
            "latest time a job can have; pass an earlier time."
        )
    return None


def idle_timeout_problem(value: object) -> str | None:
    seconds = seconds_of("idle_timeout", value)
    if isinstance(seconds, str):
        return seconds
    if seconds <= 0:
        return f"idle_timeout must be more than 0 seconds (or None for no limit), not {value!r}."
    return None


# What .using() checks before any enqueue; the rest needs the settings (queue) or the
# payload (name, dedup_key, group_key), and is checked at enqueue.
OPTION_PROBLEMS: dict[str, Callable[[Any], str | None]] = {
    "priority": priority_problem,
    "max_attempts": max_attempts_problem,
    "labels": labels_problem,
    "delay": delay_problem,
    "run_at": run_at_problem,
}


def backoff_seconds(name: str, value: object) -> float:
    seconds = seconds_of(name, value)
    if isinstance(seconds, str):
        raise ValueError(seconds)
    if seconds < 0:
        raise ValueError(f"{name} must not be negative, not {value!r}.")
    return seconds


@dataclass(frozen=True)
class Backoff:
    """How long to wait before attempt n+1 after attempt n failed."""

    kind: Literal["exponential", "fixed"] = "exponential"
    base: float = 1.0
    cap: float = 3600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "fixed"):
            raise ValueError(
                f"a backoff's kind must be 'exponential' or 'fixed', not {self.kind!r}; "
                "use Backoff.exponential(...) or Backoff.fixed(...)."
            )
        base = backoff_seconds("a backoff's base", self.base)
        cap = backoff_seconds("a backoff's cap", self.cap)
        if self.kind == "exponential" and cap < base:
            raise ValueError(
                f"an exponential backoff's cap ({cap:g}s) is below its base ({base:g}s); "
                "raise the cap or lower the base."
            )
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "cap", cap)

    @classmethod
    def exponential(
        cls, base: Seconds = 1.0, cap: Seconds = 3600.0, *, jitter: bool = True
    ) -> Backoff:
        return cls(
            "exponential",
            backoff_seconds("a backoff's base", base),
            backoff_seconds("a backoff's cap", cap),
            jitter,
        )

    @classmethod
    def fixed(cls, delay: Seconds, *, jitter: bool = False) -> Backoff:
        seconds = backoff_seconds("a fixed backoff's delay", delay)
        return cls("fixed", seconds, seconds, jitter)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the `attempt`-th failure (1-based); equal jitter."""
        if self.kind == "fixed":
            raw = self.base
        else:
            raw = min(self.cap, self.base * (2 ** min(max(attempt - 1, 0), 62)))
        if not self.jitter:
            return raw
        return raw / 2 + (rng or random).uniform(0, raw / 2)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Backoff | None:
        """The stored backoff, or None (the kind's own then applies) for none or one
        this version refuses, such as a row written before backoffs were checked."""
        if not data:
            return None
        try:
            return cls(
                kind=data.get("kind", "exponential"),
                base=float(data.get("base", 1.0)),
                cap=float(data.get("cap", 3600.0)),
                jitter=bool(data.get("jitter", True)),
            )
        except (TypeError, ValueError):
            return None


DEFAULT_BACKOFF = Backoff.exponential(1, 3600)


@dataclass(frozen=True)
class EnqueueOptions:
    """Per-call overrides, set with `definition.using(...)`."""

    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: float | None = None
    dedup_key: str | None = None
    max_attempts: int | None = None
    name: str | None = None
    group_key: str | None = None
    labels: tuple[str, ...] | None = None
    meta: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class JobDefinition[**P = ..., R = Any]:
    """A registered job kind. Call `.enqueue(...)` to queue it, or call it directly to run it."""

    func: Callable[..., R]  # with its ctx first when takes_context
    kind: str
    queue: str
    priority: int = 0
    max_attempts: int = 20
    backoff: Backoff = DEFAULT_BACKOFF
    idle_timeout: float | None = None
    name: str | Callable[[dict[str, Any]], str] | None = None
    group_key: str | Callable[[dict[str, Any]], str | None] | None = None
    labels: tuple[str, ...] = ()
    on_error: OnError = "retry"
    takes_context: bool = False
    django_task: bool = False
    options: EnqueueOptions = field(default_factory=EnqueueOptions)
    signature: inspect.Signature = field(init=False, repr=False, compare=False)
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Computed once: the worker asks for these on every job.
        sig = inspect.signature(self.func)
        if self.takes_context:
            sig = sig.replace(parameters=list(sig.parameters.values())[1:])
        params = list(sig.parameters.values())
        object.__setattr__(self, "signature", sig)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.func))
        object.__setattr__(
            self,
            "_names",
            (
                frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD),
                frozenset(
                    p.name
                    for p in params
                    if p.default is inspect.Parameter.empty
                    and p.kind is not inspect.Parameter.VAR_KEYWORD
                ),
                any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params),
            ),
        )
        object.__setattr__(
            self,
            "_simple",
            all(
                p.kind
                in (
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    inspect.Parameter.KEYWORD_ONLY,
                    inspect.Parameter.VAR_KEYWORD,
                )
                for p in params
            ),
        )

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.func(*args, **kwargs)

    def using(self, **overrides: Any) -> Self:
        """A copy with per-call options: queue, priority, run_at, delay, dedup_key, ..."""
        unknown = set(overrides) - {f.name for f in dataclasses.fields(EnqueueOptions)}
        if unknown:
            names = ", ".join(sorted(unknown))
            raise TypeError(f"{self.kind}.using() got unknown option(s): {names}")
        for name, value in overrides.items():
            check = OPTION_PROBLEMS.get(name)
            problem = None if value is None or check is None else check(value)
            if problem is not None:
                from queue_engine.exceptions import EnqueueError

                raise EnqueueError(f"{self.kind}: {problem}")
        if "delay" in overrides:
            overrides["delay"] = to_seconds(overrides["delay"])
        if overrides.get("labels") is not None:
            overrides["labels"] = tuple(overrides["labels"])
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **overrides))

    def payload_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Bind a call's arguments to parameter names: the payload is a JSON object."""
        if not args and self._simple:  # type: ignore[attr-defined]
            names, required, open_kwargs = self._names  # type: ignore[attr-defined]
            if required <= kwargs.keys() and (open_kwargs or kwargs.keys() <= names):
                return dict(kwargs)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.kind}: {exc}") from None
        payload = dict(bound.arguments)
        for param in self.signature.parameters.values():
            if param.kind is inspect.Parameter.VAR_KEYWORD and param.name in payload:
                payload.update(payload.pop(param.name))
        return payload

    def call_arguments(self, payload: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The inverse of `payload_for`: positional and keyword arguments for the handler."""
        if self._simple:  # type: ignore[attr-defined]
            return [], dict(payload)
        params = list(self.signature.parameters.values())
        kwargs: dict[str, Any] = dict(payload)
        star = next((p for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        # With *args present, everything before it must be passed by position too.
        all_by_position = star is not None and bool(kwargs.get(star.name))
        args: list[Any] = []
        for param in params:
            if param.name not in kwargs:
                continue
            if param.kind is inspect.Parameter.POSITIONAL_ONLY or (
                all_by_position and param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            ):
                args.append(kwargs.pop(param.name))
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                args.extend(kwargs.pop(param.name))
        return args, kwargs

    def display_name_for(self, payload: dict[str, Any]) -> str:
        if self.name is None:
            return ""
        if callable(self.name):
            return str(self.name(payload))[:255]
        return self.name

    def group_key_for(self, payload: dict[str, Any]) -> str | None:
        if self.group_key is None:
            return None
        if callable(self.group_key):
            value = self.group_key(payload)
            return None if value is None else str(value)[:255]
        return self.group_key

    def payload_of(self, call: Call) -> dict[str, Any]:
        """`payload_for` of one item of `enqueue_many`."""
        if type(call) is dict:
            return self.payload_for((), call)
        if isinstance(call, Mapping):
            return self.payload_for((), dict(call))
        return self.payload_for(tuple(call), {})
