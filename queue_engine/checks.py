"""System checks: our `runworker` wins, the tasks backend and QUEUE_ENGINE are sane."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.tasks.base import DEFAULT_TASK_QUEUE_NAME


def register() -> None:
    checks.register(check_runworker_command, checks.Tags.compatibility)
    checks.register(check_tasks_backend, checks.Tags.compatibility)
    checks.register(check_engine_settings, checks.Tags.compatibility)
    checks.register(check_schedules, checks.Tags.compatibility)
    checks.register(check_queue_settings, checks.Tags.compatibility)


def check_runworker_command(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from django.core.management import get_commands

    owner = get_commands().get("runworker")
    if owner != "queue_engine":
        return [
            checks.Error(
                f"`manage.py runworker` resolves to the {owner!r} app, not queue_engine.",
                hint="Remove 'channels' from INSTALLED_APPS (daphne does not need it), or list "
                "'queue_engine' before it.",
                id="queue_engine.E001",
            )
        ]
    return []


def check_tasks_backend(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from queue_engine.conf import option

    errors: list[checks.CheckMessage] = []
    for alias, config in getattr(settings, "TASKS", {}).items():
        if config.get("BACKEND") != "queue_engine.tasks_backend.QueueEngineBackend":
            continue
        queues = config.get("QUEUES")
        if queues is not None and not queues:
            errors.append(
                checks.Error(
                    f"TASKS[{alias!r}]['QUEUES'] is empty, so no task could be enqueued.",
                    hint="Remove QUEUES to allow any queue name, or list the queue names.",
                    id="queue_engine.E002",
                )
            )
        declared = option("QUEUES")
        # Without QUEUES a task may name any queue, and one that names none goes to
        # Django's default queue: that one at least must be declared.
        wanted = set(queues) if queues else {DEFAULT_TASK_QUEUE_NAME}
        if (
            isinstance(declared, dict)
            and option("ALLOW_UNDECLARED_QUEUES") is False
            and wanted - set(declared)
        ):
            missing = ", ".join(sorted(wanted - set(declared)))
            where = (
                f"TASKS[{alias!r}]['QUEUES'] names queues"
                if queues
                else f"Tasks of TASKS[{alias!r}] go to Django's default queue, which"
            )
            errors.append(
                checks.Error(
                    f"{where} QUEUE_ENGINE['QUEUES'] does not declare ({missing}), while "
                    "ALLOW_UNDECLARED_QUEUES is False: tasks sent there would be refused.",
                    hint="Declare them in QUEUE_ENGINE['QUEUES'], or list the queues tasks "
                    "may use in TASKS[...]['QUEUES'].",
                    id="queue_engine.E009",
                )
            )
        if config.get("OPTIONS"):
            errors.append(
                checks.Warning(
                    f"TASKS[{alias!r}]['OPTIONS'] is ignored by the queue_engine backend.",
                    hint="Put engine options in settings.QUEUE_ENGINE.",
                    id="queue_engine.W001",
                )
            )
    return errors


def check_engine_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from queue_engine.conf import option, unknown_options

    errors: list[checks.CheckMessage] = []
    for name in unknown_options():
        errors.append(
            checks.Error(
                f"QUEUE_ENGINE has an unknown option {name!r}.",
                hint="See queue_engine/conf.py for the options and their defaults.",
                id="queue_engine.E003",
            )
        )
    int_max = 2**31 - 1  # an integer column
    for name, kind, minimum, maximum in (
        ("DEFAULT_MAX_ATTEMPTS", int, 1, int_max),
        ("MAX_PAYLOAD_BYTES", int, 1, None),
        ("POLL_INTERVAL", (int, float), 0.01, None),
        ("FLOW_RELEASE_CHUNK", int, 1, None),
        ("LOCK_DURATION", (int, float), 1, None),
        ("MAX_RESCUES", int, 1, int_max),
        ("SHUTDOWN_TIMEOUT", (int, float), 0, None),
        ("CONSOLE_STATEMENT_TIMEOUT", (int, float), 0, None),
        ("HISTORY_PARTITION", int, 1, 366 * 86400),
        ("METRICS_FAILURE_LIMIT", int, 1, int_max),
        ("METRICS_FAILURE_WINDOW", int, 1, 86400),
        ("SIGN_IN_ADDRESS_LIMIT", int, 1, int_max),
    ):
        value = option(name)
        if name == "HISTORY_PARTITION" and value is None:
            continue  # chosen from the retention windows
        if (
            not isinstance(value, kind)
            or isinstance(value, bool)
            or not value >= minimum
            or (maximum is not None and not value <= maximum)
        ):
            what = "a whole number" if kind is int else "a number"
            bounds = f"from {minimum} to {maximum}" if maximum else f"of at least {minimum}"
            errors.append(
                checks.Error(
                    f"QUEUE_ENGINE[{name!r}] must be {what} {bounds}, not {value!r}.",
                    id="queue_engine.E004",
                )
            )
    for name in (
        "ALLOW_UNKNOWN_KINDS",
        "ALLOW_UNDECLARED_QUEUES",
        "PREPARED_STATEMENTS",
        "OPENTELEMETRY",
    ):
        value = option(name)
        if not isinstance(value, bool):
            errors.append(
                checks.Error(
                    f"QUEUE_ENGINE[{name!r}] must be True or False, not {value!r}.",
                    id="queue_engine.E005",
                )
            )
    default_queue = option("DEFAULT_QUEUE")
    if not isinstance(default_queue, str) or not default_queue.strip() or len(default_queue) > 128:
        errors.append(
            checks.Error(
                "QUEUE_ENGINE['DEFAULT_QUEUE'] must be a queue name of 1 to 128 characters, "
                f"not {default_queue!r}.",
                id="queue_engine.E007",
            )
        )
    log_format = option("LOG_FORMAT")
    if log_format not in ("text", "json"):
        errors.append(
            checks.Error(
                f"QUEUE_ENGINE['LOG_FORMAT'] must be 'text' or 'json', not {log_format!r}.",
                id="queue_engine.E027",
            )
        )
    for name in ("CONSOLE_MASKED_KEYS", "CONSOLE_MASKED_KEY_PARTS"):
        masked = option(name)
        if not isinstance(masked, list | tuple | set | frozenset) or not all(
            isinstance(word, str) for word in masked
        ):
            errors.append(
                checks.Error(
                    f"QUEUE_ENGINE[{name!r}] must be a list of words, not {masked!r}.",
                    id="queue_engine.E008",
                )
            )
    live = option("LIVE_UPDATES")
    if live not in ("auto", "websocket", "poll"):
        errors.append(
            checks.Error(
                f"QUEUE_ENGINE['LIVE_UPDATES'] must be 'auto', 'websocket' or 'poll', not {live!r}.",
                hint="'auto' uses websockets where the ASGI application serves "
                "queue_engine.console.asgi.console_websockets(), and polling elsewhere.",
                id="queue_engine.E026",
            )
        )
    errors += check_middleware()
    errors += check_trusted_proxies(option("TRUSTED_PROXIES"))
    queues = option("QUEUES")  # its shape and values: check_queue_settings
    if (
        isinstance(queues, dict)
        and not option("ALLOW_UNDECLARED_QUEUES")
        and option("DEFAULT_QUEUE") not in queues
    ):
        errors.append(
            checks.Error(
                f"The default queue {option('DEFAULT_QUEUE')!r} is not declared in QUEUES, "
                "while ALLOW_UNDECLARED_QUEUES is False.",
                id="queue_engine.E006",
            )
        )
    if isinstance(queues, dict) and not option("ALLOW_UNDECLARED_QUEUES"):
        from queue_engine.definition.registry import registry

        stray = [
            f"{kind} ({definition.queue!r})"
            for kind in registry.kinds()
            if (definition := registry.get(kind)) is not None and definition.queue not in queues
        ]
        if stray:
            errors.append(
                checks.Error(
                    f"Job kind(s) {', '.join(stray[:5])}{' and more' if len(stray) > 5 else ''} "
                    "use a queue QUEUES does not declare, while ALLOW_UNDECLARED_QUEUES is "
                    "False: every enqueue of them will be refused.",
                    hint="Declare the queue in QUEUE_ENGINE['QUEUES'], or give the kind a "
                    "declared queue with @job(queue=...).",
                    id="queue_engine.E010",
                )
            )
    return errors


def check_trusted_proxies(proxies: Any) -> list[checks.CheckMessage]:
    import ipaddress

    wrong = repr(proxies)
    if isinstance(proxies, list | tuple):
        for proxy in proxies:
            try:
                ipaddress.ip_network(str(proxy).strip(), strict=False)
            except ValueError:
                wrong = repr(proxy)
                break
        else:
            return []
    return [
        checks.Error(
            f"QUEUE_ENGINE['TRUSTED_PROXIES'] must list addresses or networks of proxies "
            f'("10.0.0.5", "10.0.0.0/8"); {wrong} is not one.',
            id="queue_engine.E011",
        )
    ]


def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from queue_engine.conf import option
    from queue_engine.exceptions import ScheduleError
    from queue_engine.schedules.api import settings_declarations

    try:
        settings_declarations(option("SCHEDULES"))
    except ScheduleError as exc:
        return [
            checks.Error(
                str(exc), hint="See SCHEDULES in queue_engine/conf.py.", id="queue_engine.E020"
            )
        ]
    return []


def check_queue_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from queue_engine.queue_defaults import settings_problems

    return [
        checks.Error(
            problem,
            hint="See QUEUES and QUEUE_DEFAULTS in queue_engine/conf.py.",
            id="queue_engine.E021",
        )
        for problem in settings_problems()
    ]


def check_middleware() -> list[checks.CheckMessage]:
    """JOB_MIDDLEWARE and ENQUEUE_MIDDLEWARE name what imports; CONSOLE_URL is an address."""
    from django.utils.module_loading import import_string

    from queue_engine.conf import option

    errors: list[checks.CheckMessage] = []
    for name in ("JOB_MIDDLEWARE", "ENQUEUE_MIDDLEWARE"):
        paths = option(name)
        if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
            errors.append(
                checks.Error(
                    f"QUEUE_ENGINE[{name!r}] must be a list of dotted paths, not {paths!r}.",
                    id="queue_engine.E028",
                )
            )
            continue
        for path in paths:
            try:
                import_string(path)
            except ImportError as exc:
                errors.append(
                    checks.Error(
                        f"QUEUE_ENGINE[{name!r}] names {path!r}, which cannot be imported: {exc}.",
                        hint="Give the dotted path of a class (JOB_MIDDLEWARE) or a function "
                        "(ENQUEUE_MIDDLEWARE); see docs/howto/middleware.md.",
                        id="queue_engine.E028",
                    )
                )
    url = option("CONSOLE_URL")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        errors.append(
            checks.Error(
                f"QUEUE_ENGINE['CONSOLE_URL'] must be None or the console's http(s) address, "
                f"not {url!r}.",
                id="queue_engine.E029",
            )
        )
    return errors
