from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import get_commands
from django.test import override_settings

from queue_engine import checks
from queue_engine.definition.registry import autodiscover, registry
from tests.support import jobs


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


@override_settings(
    QUEUE_ENGINE={
        "ALLOW_UNDECLARED_QUEUES": "no",
        "DEFAULT_QUEUE": "",
        "MAX_RESCUES": -1,
        "SHUTDOWN_TIMEOUT": "x",
        "CONSOLE_STATEMENT_TIMEOUT": -5,
        "CONSOLE_MASKED_KEYS": "password",
    }
)
def test_mistyped_engine_settings_are_reported_with_the_option_named() -> None:
    errors = checks.check_engine_settings()

    assert sorted(str(e.id) for e in errors) == [
        *["queue_engine.E004"] * 3,
        "queue_engine.E005",
        "queue_engine.E007",
        "queue_engine.E008",
    ]
    text = " ".join(e.msg for e in errors)
    for name in ("MAX_RESCUES", "SHUTDOWN_TIMEOUT", "CONSOLE_STATEMENT_TIMEOUT", "ALLOW_UNDECL"):
        assert name in text


@override_settings(QUEUE_ENGINE=["not", "a", "dict"])
def test_a_queue_engine_setting_that_is_not_a_dict_is_one_clear_error() -> None:
    with pytest.raises(ImproperlyConfigured, match="QUEUE_ENGINE must be a dict of options"):
        checks.check_engine_settings()


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ("tests.support.jobs", "must be a list of module names"),
        (["tests.no_such_jobs"], "names 'tests.no_such_jobs', which cannot be imported"),
    ],
)
def test_bad_job_modules_are_one_clear_error(modules: Any, message: str) -> None:
    with (
        override_settings(QUEUE_ENGINE={"JOB_MODULES": modules}),
        pytest.raises(ImproperlyConfigured, match=message),
    ):
        autodiscover()


def test_tasks_queues_must_be_declared_when_queues_are_locked_down() -> None:
    tasks = {
        "default": {
            "BACKEND": "queue_engine.tasks_backend.QueueEngineBackend",
            "QUEUES": ["default", "emails"],
        }
    }
    engine = {"QUEUES": {"default": {}}, "ALLOW_UNDECLARED_QUEUES": False}

    with override_settings(TASKS=tasks, QUEUE_ENGINE=engine):
        errors = checks.check_tasks_backend()

    assert [e.id for e in errors] == ["queue_engine.E009"]
    assert "(emails)" in errors[0].msg


@override_settings(QUEUE_ENGINE={"QUEUES": {"emails": {}}, "ALLOW_UNDECLARED_QUEUES": False})
def test_locked_down_queues_must_include_the_default_queue() -> None:
    assert "queue_engine.E006" in [e.id for e in checks.check_engine_settings()]


def test_a_kind_on_a_queue_that_is_not_declared_is_reported() -> None:
    # Every queue a registered kind uses is declared but "math", where tests.add runs.
    assert jobs.add.queue == "math"
    used = {d.queue for kind in registry.kinds() if (d := registry.get(kind)) is not None}
    declared: dict[str, dict[str, Any]] = {q: {} for q in used | {"default"} if q != "math"}
    engine = {"QUEUES": declared, "ALLOW_UNDECLARED_QUEUES": False}
    with override_settings(QUEUE_ENGINE=engine):
        errors = [e for e in checks.check_engine_settings() if e.id == "queue_engine.E010"]

    assert len(errors) == 1
    assert "tests.add ('math')" in errors[0].msg
    assert "every enqueue of them will be refused" in errors[0].msg


def test_tasks_without_queues_need_djangos_default_queue_declared() -> None:
    tasks = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend"}}
    engine = {"QUEUES": {"emails": {}}, "DEFAULT_QUEUE": "emails", "ALLOW_UNDECLARED_QUEUES": False}

    with override_settings(TASKS=tasks, QUEUE_ENGINE=engine):
        errors = checks.check_tasks_backend()

    assert [e.id for e in errors] == ["queue_engine.E009"]
    assert "Django's default queue" in errors[0].msg and "(default)" in errors[0].msg


@override_settings(QUEUE_ENGINE={"CONSOLE_MASKED_KEYS": None, "DEFAULT_MAX_ATTEMPTS": 2**40})
def test_settings_no_job_could_use_are_reported_not_a_traceback() -> None:
    errors = checks.check_engine_settings()

    assert sorted(str(e.id) for e in errors) == ["queue_engine.E004", "queue_engine.E008"]
    assert "from 1 to 2147483647" in " ".join(e.msg for e in errors)


@pytest.mark.parametrize(
    ("config", "expected"),
    [({"QUEUES": []}, "queue_engine.E002"), ({"OPTIONS": {"x": 1}}, "queue_engine.W001")],
)
def test_inconsistent_tasks_backend_is_reported(config: dict[str, Any], expected: str) -> None:
    tasks = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend", **config}}

    with override_settings(TASKS=tasks):
        ids = [e.id for e in checks.check_tasks_backend()]

    assert ids == [expected]


@pytest.mark.parametrize("proxies", ["10.0.0.5", ["10.0.0.5", "proxy.local"], ["10.0.0.0/33"]])
def test_trusted_proxies_must_be_addresses_or_networks(proxies: Any) -> None:
    with override_settings(QUEUE_ENGINE={"TRUSTED_PROXIES": proxies}):
        errors = [e for e in checks.check_engine_settings() if e.id == "queue_engine.E011"]

    assert len(errors) == 1
    assert "must list addresses or networks of proxies" in errors[0].msg


@override_settings(QUEUE_ENGINE={"TRUSTED_PROXIES": ["10.0.0.5", "fd00::/8"]})
def test_trusted_proxies_may_mix_addresses_and_networks() -> None:
    assert "queue_engine.E011" not in [e.id for e in checks.check_engine_settings()]
