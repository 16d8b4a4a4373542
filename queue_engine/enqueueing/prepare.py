"""What an enqueue decides before it writes: the spec, the kind's options, the row, and every check on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.definition.job import (
    Backoff,
    EnqueueOptions,
    JobDefinition,
    delay_problem,
    labels_problem,
    max_attempts_problem,
    priority_problem,
    run_at_problem,
)
from queue_engine.definition.registry import registry
from queue_engine.durations import Seconds, to_seconds
from queue_engine.enqueueing.hooks import additions
from queue_engine.exceptions import (
    EnqueueError,
    InvalidPayloadError,
    PayloadError,
    UnknownKindError,
)
from queue_engine.payloads import dump_json, text_problem


@dataclass
class JobSpec:
    """One job to enqueue, for `enqueue` and `enqueue_many` (any kind, any options)."""

    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: Seconds | None = None
    dedup_key: str | None = None
    max_attempts: int | None = None
    name: str | None = None
    group_key: str | None = None
    labels: Sequence[str] | None = None
    meta: Mapping[str, Any] | None = None
    backoff: Backoff | None = None


@dataclass(slots=True)
class Row:
    """A validated job, ready to insert: what its payload decides, and (in `decided`)
    what its kind and options decide."""

    kind: str
    name: str
    payload: str
    dedup_key: str | None
    group_key: str | None
    meta: str
    payload_value: Mapping[str, Any]
    meta_value: Mapping[str, Any]
    decided: KindOptions

    @property
    def queue(self) -> str:
        return self.decided.queue

    @property
    def priority(self) -> int:
        return self.decided.priority

    @property
    def max_attempts(self) -> int:
        return self.decided.max_attempts

    @property
    def backoff(self) -> str | None:
        return self.decided.backoff

    @property
    def labels(self) -> list[str]:
        return self.decided.labels

    @property
    def run_at(self) -> datetime | None:
        return self.decided.run_at

    @property
    def delay(self) -> float:
        return self.decided.delay

    def starts_at(self, now: datetime) -> datetime:
        """When the job may run, given the database clock of its insert."""
        if self.run_at is not None:
            return self.run_at
        return now + timedelta(seconds=self.delay) if self.delay else now

    @property
    def plain(self) -> bool:
        """Whether every column but queue, kind, payload and max_attempts takes its default
        (sql.INSERT_PLAIN_JOB)."""
        return (
            not self.name
            and self.dedup_key is None
            and self.group_key is None
            and self.meta == "{}"
            and self.decided.plain
        )

    def values(self) -> tuple[Any, ...]:
        """INSERT_JOB's parameters, in its $n order (sql.INSERT_JOB_PARAMS)."""
        return tuple(getattr(self, name) for name in sql.INSERT_JOB_PARAMS)

    def params(self) -> dict[str, Any]:
        """INSERT_JOB's parameters by name (also those of its dedup variants)."""
        return {name: getattr(self, name) for name in sql.INSERT_JOB_PARAMS}


@dataclass(frozen=True, slots=True)
class KindOptions:
    """What a job's kind and per-call options decide, whatever its payload.

    `enqueue_many` checks each distinct set once (see `prepare`'s `seen`), not once a job.
    """

    definition: JobDefinition | None
    queue: str
    priority: int
    max_attempts: int
    labels: list[str]
    backoff: str | None
    run_at: datetime | None
    delay: float

    @property
    def plain(self) -> bool:
        """Whether the columns these options decide, but queue and max_attempts, all take
        their defaults (half of Row.plain)."""
        return (
            not self.priority
            and self.backoff is None
            and not self.labels
            and self.run_at is None
            and not self.delay
        )


def spec_for(definition: JobDefinition, payload: Mapping[str, Any]) -> JobSpec:
    o: EnqueueOptions = definition.options
    return JobSpec(
        kind=definition.kind,
        payload=payload,
        queue=o.queue,
        priority=o.priority,
        run_at=o.run_at,
        delay=o.delay,
        dedup_key=o.dedup_key,
        max_attempts=o.max_attempts,
        name=o.name,
        group_key=o.group_key,
        labels=o.labels,
        meta=o.meta,
    )


type SeenOptions = dict[tuple[Any, ...], KindOptions]


def prepare(
    spec: JobSpec,
    definition: JobDefinition | None = None,
    options: dict[str, Any] | None = None,
    *,
    seen: SeenOptions | None = None,
) -> Row:
    """Validate a spec against its kind's definition and the engine's options.

    `seen` caches the payload-independent checks across the specs of one call.
    """
    opts = options if options is not None else snapshot()
    kind = spec.kind
    if seen is None:
        decided = kind_options(spec, definition, opts)
    else:
        labels = spec.labels
        key = (
            kind,
            spec.queue,
            spec.priority,
            spec.max_attempts,
            labels if labels is None or type(labels) is tuple else tuple(labels),
            spec.backoff,
            spec.run_at,
            spec.delay,
        )
        try:
            found = seen.get(key)
        except TypeError:  # an unhashable option: kind_options says what is wrong with it
            found = kind_options(spec, definition, opts)
        if found is None:
            found = seen[key] = kind_options(spec, definition, opts)
        decided = found
    payload = spec.payload
    if not isinstance(payload, Mapping):
        raise InvalidPayloadError(
            f"{kind}: the payload must be a dict of named arguments, "
            f"not a {type(payload).__name__}."
        )
    return build_row(
        decided, kind, dict(payload), spec.dedup_key, spec.name, spec.group_key, spec.meta, opts
    )


def build_row(
    decided: KindOptions,
    kind: str,
    payload: dict[str, Any],
    dedup_key: str | None,
    name: str | None,
    group_key: str | None,
    meta: Mapping[str, Any] | None,
    opts: dict[str, Any],
) -> Row:
    """The payload-dependent half of `prepare`: `payload` must be the caller's own copy."""
    definition = decided.definition
    try:
        payload_text = dump_json(
            payload, what=f"{kind}: the payload", max_bytes=opts["MAX_PAYLOAD_BYTES"]
        )
        meta = dict(meta) if meta else {}
        added = additions(kind, decided.queue, payload, meta)
        if added:
            meta = {**added, **meta}
        meta_text = dump_json(meta, what=f"{kind}: meta") if meta else "{}"
    except PayloadError as exc:
        raise InvalidPayloadError(str(exc)) from None
    if name is None:
        name = definition.display_name_for(payload) if definition else ""
    if group_key is None and definition is not None:
        group_key = definition.group_key_for(payload)
    for text, what in ((dedup_key, "dedup_key"), (group_key, "group_key")):
        if text is not None and (type(text) is not str or not 0 < len(text) <= 255):
            raise EnqueueError(f"{kind}: {what} must be a string of 1 to 255 characters.")
    if type(name) is not str or len(name) > 255:
        name = str(name)[:255]
    for text, what in ((name, "display name"), (dedup_key, "dedup_key"), (group_key, "group_key")):
        problem = text_problem(text) if text else None
        if problem is not None:
            raise EnqueueError(f"{kind}: the {what} {text!r} {problem}")
    return Row(
        kind,
        name,
        payload_text,
        dedup_key,
        group_key,
        meta_text,
        payload,
        meta,
        decided,
    )


def kind_options(
    spec: JobSpec, definition: JobDefinition | None, opts: dict[str, Any]
) -> KindOptions:
    """Check what the kind and the options decide (everything but the payload)."""
    kind = spec.kind
    if definition is None:
        definition = registry.get(kind)
    if definition is None and not opts["ALLOW_UNKNOWN_KINDS"]:
        known = ", ".join(registry.kinds()[:10]) or "none"
        raise UnknownKindError(
            f"Unknown job kind {kind!r}: no @job with that kind is registered in this process "
            f"(known: {known}). Import the module that defines it (QUEUE_ENGINE['JOB_MODULES']), "
            "or set QUEUE_ENGINE['ALLOW_UNKNOWN_KINDS'] = True to enqueue kinds another "
            "process runs."
        )
    if definition is None:
        if not isinstance(kind, str) or not 0 < len(kind) <= 255:
            raise EnqueueError(f"a job kind must be a name of 1 to 255 characters, not {kind!r}.")
        problem = text_problem(kind)
        if problem is not None:
            raise EnqueueError(f"the job kind {kind!r} {problem}")
    queue = spec.queue or (definition.queue if definition else opts["DEFAULT_QUEUE"])
    check_queue(kind, queue, opts)
    priority = (
        spec.priority if spec.priority is not None else (definition.priority if definition else 0)
    )
    max_attempts = (
        spec.max_attempts
        if spec.max_attempts is not None
        else (definition.max_attempts if definition else opts["DEFAULT_MAX_ATTEMPTS"])
    )
    labels = spec.labels if spec.labels is not None else (definition.labels if definition else ())
    problem = priority_problem(priority) or max_attempts_problem(max_attempts)
    if problem is None and spec.run_at is not None:
        problem = (
            "give run_at or delay, not both."
            if spec.delay is not None
            else run_at_problem(spec.run_at)
        )
    if problem is None and spec.delay is not None:
        problem = delay_problem(spec.delay)
    if problem is None:
        problem = labels_problem(labels)
    if problem is None and spec.backoff is not None and not isinstance(spec.backoff, Backoff):
        problem = f"backoff must be a Backoff, such as Backoff.fixed(30), not {spec.backoff!r}."
    if problem is not None:
        raise EnqueueError(f"{kind}: {problem}")
    delay = to_seconds(spec.delay) or 0.0
    backoff = spec.backoff.to_json() if spec.backoff else None
    return KindOptions(
        definition=definition,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        labels=list(labels),
        backoff=dump_json(backoff, what="backoff") if backoff else None,
        run_at=spec.run_at,
        delay=delay,
    )


def check_queue(kind: str, queue: str, opts: dict[str, Any]) -> None:
    if not isinstance(queue, str) or not 0 < len(queue) <= 128:
        raise EnqueueError(f"{kind}: queue must be a name of 1 to 128 characters, not {queue!r}.")
    problem = text_problem(queue)
    if problem is not None:
        raise EnqueueError(f"{kind}: the queue name {queue!r} {problem}")
    declared = opts["QUEUES"]
    if not opts["ALLOW_UNDECLARED_QUEUES"] and queue not in declared:
        names = ", ".join(sorted(declared)) or "none"
        raise EnqueueError(
            f"{kind}: queue {queue!r} is not declared (declared: {names}); add it to "
            "QUEUE_ENGINE['QUEUES'] or pick a declared queue."
        )
