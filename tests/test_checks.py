from __future__ import annotations

from typing import Any

import pytest
from django.core.management import get_commands
from django.test import override_settings

from queue_engine import checks


def test_default_settings_pass_every_check() -> None:
    errors = (
        checks.check_runworker_command()
        + checks.check_tasks_backend()
        + checks.check_engine_settings()
    )

    assert errors == []


def test_runworker_resolves_to_queue_engine() -> None:
    assert get_commands()["runworker"] == "queue_engine"


def forget_commands() -> None:
    # get_commands is functools.cache'd; django-stubs types it as a plain function.
    get_commands.cache_clear()  # type: ignore[attr-defined]


def test_channels_app_listed_first_is_reported(settings) -> None:  # type: ignore[no-untyped-def]
    forget_commands()
    try:
        with override_settings(INSTALLED_APPS=["channels", *settings.INSTALLED_APPS]):
            forget_commands()
            errors = checks.check_runworker_command()
    finally:
        forget_commands()

    assert [e.id for e in errors] == ["queue_engine.E001"]
    assert "channels" in errors[0].msg


@override_settings(QUEUE_ENGINE={"MAX_PAYLOAD_BYTES": -1, "TYPO_OPTION": 1})
def test_bad_engine_settings_are_reported() -> None:
    ids = sorted(str(e.id) for e in checks.check_engine_settings())

    assert ids == ["queue_engine.E003", "queue_engine.E004"]


@override_settings(QUEUE_ENGINE={"QUEUES": {"emails": {}}, "ALLOW_UNDECLARED_QUEUES": False})
def test_locked_down_queues_must_include_the_default_queue() -> None:
    assert [e.id for e in checks.check_engine_settings()] == ["queue_engine.E006"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [({"QUEUES": []}, "queue_engine.E002"), ({"OPTIONS": {"x": 1}}, "queue_engine.W001")],
)
def test_inconsistent_tasks_backend_is_reported(config: dict[str, Any], expected: str) -> None:
    tasks = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend", **config}}

    with override_settings(TASKS=tasks):
        ids = [e.id for e in checks.check_tasks_backend()]

    assert ids == [expected]
