from __future__ import annotations

import random

import pytest

from queue_engine.definitions import Backoff, Retry, Snooze, job
from queue_engine.registry import registry
from tests import jobs


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
