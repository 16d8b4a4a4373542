"""`manage.py runworker`: options, then one worker or a supervisor of several."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
from argparse import ArgumentParser
from typing import TYPE_CHECKING, Any

from queue_engine.conf import option
from queue_engine.worker.logsetup import LOG_FORMATS, chosen_format, configure_logging

if TYPE_CHECKING:
    from queue_engine.worker.options import WorkerOptions


def add_arguments(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--queues",
        default="",
        help="comma-separated queue names to work (default: every queue), each with an "
        "optional weight: critical:6,default:3,low:1 shares claims 6:3:1 while all have work",
    )
    parser.add_argument(
        "--concurrency", type=int, default=10, help="jobs run at once by each process (default 10)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes to start and supervise (default 1)",
    )
    parser.add_argument(
        "--labels",
        default="",
        help="comma-separated labels; only jobs whose required labels are all here are claimed",
    )
    parser.add_argument("--worker-id", default="", help="name of this worker (default host-pid)")
    parser.add_argument(
        "--burst", action="store_true", help="run what is runnable now, then exit 0"
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=None,
        help="seconds running jobs get to finish on SIGTERM "
        "(default QUEUE_ENGINE['SHUTDOWN_TIMEOUT'])",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=None,
        help="seconds between polls when no notification arrives",
    )
    parser.add_argument(
        "--no-leader", action="store_true", help="never run the leader services in this process"
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help="text, or json: one JSON object a line (default QUEUE_ENGINE['LOG_FORMAT'])",
    )


def split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def warn_of_a_small_pool(concurrency: int) -> None:
    """Handler threads that use the ORM through Django's pool share its connections:
    more threads than connections wait for one, and past the pool's timeout a job's
    attempt fails with psycopg_pool's PoolTimeout. Said once, at start-up."""
    from django.db import connections

    for alias in connections:
        # Django's own pool object (made, not opened, on first access), so that its
        # sizes are psycopg_pool's with its defaults filled in.
        pool = getattr(connections[alias], "pool", None)
        if pool is not None and concurrency > pool.max_size:
            logging.getLogger("queue_engine.worker").warning(
                "--concurrency %d is more than the %d connections of database %r's pool "
                "(OPTIONS['pool']): plain functions that use the ORM will wait for a "
                "connection, and fail their attempt after the pool's timeout (%s s). "
                "Lower --concurrency or raise the pool's max_size.",
                concurrency,
                pool.max_size,
                alias,
                f"{pool.timeout:g}",
            )


def run(options: dict[str, Any]) -> None:
    from queue_engine.worker.weights import parse_queues

    if options["concurrency"] < 1:
        sys.exit("runworker: --concurrency must be at least 1")
    try:
        queues, weights = parse_queues(options["queues"])
    except ValueError as exc:
        sys.exit(f"runworker: {exc}")
    if options["processes"] > 1:
        from queue_engine.worker.supervisor import supervise

        sys.exit(supervise(options["processes"], sys.argv, chosen_format(options["log_format"])))
    from queue_engine.worker.lifecycle import Worker

    configure_logging(options.get("verbosity", 1), chosen_format(options["log_format"]))
    declare_settings()
    keep_django_connections()
    warn_of_a_small_pool(options["concurrency"])
    worker = Worker(worker_options(options, queues, weights))
    settle_the_heap()
    code = asyncio.run(worker.run())
    if worker.threads.running:
        # Plain functions still running (abandoned, or given back at the shutdown
        # timeout) must not outlive their jobs, and Python would wait for their threads
        # at exit: the process ends here, and they with it.
        logging.getLogger("queue_engine.worker").info(
            "exiting with %d handler thread(s) still running; they end with this process",
            len(worker.threads.running),
        )
        logging.shutdown()
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


def keep_django_connections() -> None:
    """Handler threads keep their Django connection between jobs, and check it only when
    it may have been closed (worker/handler_connections.py); a pooled connection goes back to
    its pool after each job instead."""
    from django.db import connections

    for alias in connections:
        settings = connections[alias].settings_dict
        if not settings["OPTIONS"].get("pool"):
            settings["CONN_MAX_AGE"] = 300
        settings["CONN_HEALTH_CHECKS"] = True


def worker_options(
    options: dict[str, Any], queues: list[str], weights: dict[str, int] | None
) -> WorkerOptions:
    """The worker's options from the command's, QUEUE_ENGINE filling what they leave out."""
    from queue_engine.connections import conninfo
    from queue_engine.worker.lifecycle import WorkerOptions

    return WorkerOptions(
        conninfo=conninfo(session=True),
        queues=queues,
        queue_weights=weights,
        concurrency=options["concurrency"],
        labels=sorted(split(options["labels"])),
        worker_id=options["worker_id"],
        burst=options["burst"],
        poll_interval=options["poll_interval"] or float(option("POLL_INTERVAL")),
        shutdown_timeout=(
            options["shutdown_timeout"]
            if options["shutdown_timeout"] is not None
            else float(option("SHUTDOWN_TIMEOUT"))
        ),
        max_rescues=int(option("MAX_RESCUES")),
        flow_release_chunk=int(option("FLOW_RELEASE_CHUNK")),
        leader=not options["no_leader"],
    )


def settle_the_heap() -> None:
    """Keep the cyclic garbage collector off what lives as long as the process.

    Django, the handlers' modules and the worker's own objects are 100,000 and more
    objects that the collector would walk again on every full collection, tens of
    milliseconds with the GIL held: a stall of every lane and handler thread, whenever
    enough objects have outlived the young collections. Frozen, they are never walked; a full
    collection then walks only what jobs left behind. Garbage is collected first so
    that none of it is kept for good.
    """
    gc.collect()
    gc.freeze()


def declare_settings() -> None:
    """Apply QUEUES, QUEUE_DEFAULTS and SCHEDULES, waiting for Postgres if it is not up yet."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db import OperationalError, connection

    from queue_engine.exceptions import ScheduleError
    from queue_engine.ops.queues import declare_configured as declare_queues
    from queue_engine.schedules.api import declare_configured
    from queue_engine.worker.outage import OUTAGE, retry_waits

    log = logging.getLogger("queue_engine.worker")
    waits = retry_waits()
    while True:
        try:
            queues = declare_queues()
            names = declare_configured()
        except (ScheduleError, ImproperlyConfigured) as exc:
            sys.exit(f"runworker: {exc}")
        except OperationalError as exc:
            OUTAGE.lost("settings", exc, None)
            connection.close()
            time.sleep(next(waits))
            continue
        OUTAGE.back("settings")
        connection.close()  # the worker's own connections take over from here
        for queue, fields in queues.items():
            log.info("queue %s: %s set from settings", queue, ", ".join(fields))
        if names:
            log.info("schedules declared from settings: %s", ", ".join(names))
        return
