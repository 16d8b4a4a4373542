from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from queue_engine.definition.decorator import job
from queue_engine.definition.job import Backoff
from queue_engine.definition.registry import registry
from queue_engine.exceptions import Retry, Snooze
from tests.support import jobs


def test_decorator_registers_kind_with_options() -> None:
    definition = registry.get("tests.add")

    assert definition is jobs.add
    assert (definition.queue, definition.priority, definition.max_attempts) == ("math", 5, 3)
    assert definition.display_name_for({"a": 1, "b": 2}) == "1 + 2"
    assert definition.group_key_for({"a": 1, "b": 2}) == "acct-1"


def test_ctx_parameter_is_detected_and_hidden_from_the_payload() -> None:
    assert jobs.async_echo.takes_context
    assert jobs.async_echo.is_async
    assert jobs.async_echo.payload_for(("hi",), {}) == {"value": "hi"}


def test_payload_round_trips_every_parameter_kind() -> None:
    payload = jobs.positional.payload_for((1, 2, 3, 4), {"flag": True, "colour": "red"})

    args, kwargs = jobs.positional.call_arguments(payload)

    assert payload == {"x": 1, "y": 2, "rest": (3, 4), "flag": True, "colour": "red"}
    assert jobs.positional(*args, **kwargs) == [1, 2, [3, 4], True, {"colour": "red"}]


def test_wrong_arguments_name_the_kind() -> None:
    with pytest.raises(TypeError, match=r"tests\.add"):
        jobs.add.payload_for((1,), {"c": 3})


def test_exponential_backoff_doubles_up_to_the_cap() -> None:
    backoff = Backoff.exponential(1, 30, jitter=False)

    delays = [backoff.delay(n) for n in range(1, 8)]

    assert delays == [1, 2, 4, 8, 16, 30, 30]


def test_jitter_stays_within_half_and_full_delay() -> None:
    backoff = Backoff.exponential(10, 1000, jitter=True)
    rng = random.Random(7)

    delays = [backoff.delay(3, rng) for _ in range(200)]

    assert all(20 <= d <= 40 for d in delays)
    assert len({round(d, 3) for d in delays}) > 100


def test_fixed_backoff_and_json_round_trip() -> None:
    backoff = Backoff.fixed(5)

    assert backoff.delay(9) == 5
    assert Backoff.from_json(backoff.to_json()) == backoff


def test_handler_errors_carry_delay_and_payload() -> None:
    assert Retry("busy", delay=3).delay == 3.0
    snooze = Snooze(60, payload={"cursor": 10})
    assert (snooze.delay, snooze.payload) == (60.0, {"cursor": 10})


def test_bad_decorator_options_are_refused() -> None:
    with pytest.raises(ValueError, match="priority"):
        job(kind="tests.bad_priority", priority=500)(lambda: None)
    with pytest.raises(ValueError, match="on_error"):
        job(kind="tests.bad_on_error", on_error="explode")(lambda: None)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, r"max_attempts must be a whole number of at least 1 .*, not 0\."),
        ({"max_attempts": -1}, r"max_attempts must be a whole number of at least 1 .*, not -1\."),
        ({"max_attempts": 2.5}, r"max_attempts must be a whole number .* not 2\.5"),
        ({"max_attempts": True}, r"max_attempts must be a whole number .* not True"),
        (
            {"labels": "gpu"},
            r"labels must be a list of strings, not the string 'gpu'; pass \['gpu'\]",
        ),
        ({"priority": True}, r"priority must be a whole number from -100 to 100 .* not True"),
        ({"priority": "5"}, r"priority must be a whole number from -100 to 100 .* not '5'"),
        ({"idle_timeout": 0}, r"idle_timeout must be more than 0 seconds"),
        ({"idle_timeout": -5}, r"idle_timeout must be more than 0 seconds"),
        ({"idle_timeout": math.inf}, r"idle_timeout must be a finite number of seconds"),
        ({"backoff": 30}, r"backoff must be a Backoff, such as Backoff\.fixed\(30\)"),
        ({"queue": "q" * 129}, r"the queue must be a name of 1 to 128 characters"),
        ({"queue": "mail\x00"}, r"the queue 'mail\\x00' .*NUL"),
    ],
)
def test_bad_declared_options_are_refused_at_declaration(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=rf"^@job tests\.bad_options: {message}"):
        job(kind="tests.bad_options", **options)(lambda: None)  # type: ignore[call-overload]

    assert registry.get("tests.bad_options") is None


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("k" * 256, r"the kind must be a name of 1 to 255 characters"),
        ("tests.\x00nul", r"the kind 'tests\.\\x00nul' .*NUL"),
    ],
)
def test_a_kind_name_postgres_cannot_store_is_refused_at_declaration(
    kind: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        job(kind=kind)(lambda: None)

    assert registry.get(kind) is None


def test_declared_max_attempts_of_one_is_kept() -> None:
    assert jobs.snoozer.max_attempts == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Backoff.fixed(-1), r"a fixed backoff's delay must not be negative, not -1"),
        (lambda: Backoff.exponential(60, 10), r"cap \(10s\) is below its base \(60s\)"),
        (lambda: Backoff.exponential(1, math.inf), r"cap must be a finite number of seconds"),
        (lambda: Backoff("linear"), r"kind must be 'exponential' or 'fixed', not 'linear'"),  # type: ignore[arg-type]
    ],
)
def test_backoffs_that_cannot_work_are_refused(make: Callable[[], Backoff], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_a_stored_backoff_this_version_refuses_reads_as_none_so_the_kinds_applies() -> None:
    # A row written before backoffs were checked must not crash the worker that retries it.
    assert Backoff.from_json({"kind": "fixed", "base": -1, "cap": -1}) is None
    assert Backoff.from_json({"kind": "linear", "base": 1, "cap": 10}) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("queue_engine.kinds", "queue_engine.definition.decorator"),
        ("queue_engine.definitions", "queue_engine.definition.job"),
    ],
)
def test_the_modules_0_1_0_defined_jobs_from_still_import_with_a_warning(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sys

    import queue_engine

    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"import job and Backoff from queue_engine.*{new}"):
        module = importlib.import_module(old)
    if old.endswith("kinds"):
        assert module.job is queue_engine.job
        assert module.JobKind.__module__ == new
    else:
        assert module.Backoff is queue_engine.Backoff
        assert module.JobDefinition.__module__ == new
