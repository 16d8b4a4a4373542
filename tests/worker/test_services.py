"""The one shape every leader service has (worker/services/service.py), and the rules by
which the leader runs them (worker/services/runner.py)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, cast

import psycopg
import pytest

from queue_engine.worker.services import Every, Service, leader_services
from tests.support.services import run_service, service_steps
from tests.support.workers import Workers

NAMES = [service.name for service in leader_services(conninfo="", max_rescues=5, flow_chunk=10)]


def one_service(conninfo: str, name: str) -> Service:
    services = leader_services(conninfo=conninfo, max_rescues=5, flow_chunk=10)
    return next(service for service in services if service.name == name)


def test_every_service_has_a_name_of_its_own() -> None:
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_services_interval_is_its_own_and_not_negative(name: str) -> None:
    service = one_service("", name)

    owner = next(c for c in type(service).__mro__ if "interval" in vars(c))

    assert owner.__module__ == type(service).__module__
    assert service.interval >= 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", NAMES)
def test_a_step_says_whether_more_is_waiting_and_close_stops_the_service(
    conninfo: str, name: str
) -> None:
    service = one_service(conninfo, name)

    async def step_then_close(conn: psycopg.AsyncConnection) -> Any:
        try:
            return await service.run(conn)
        finally:
            closing = service.close()
            assert inspect.isawaitable(closing)
            await closing

    assert run_service(conninfo, step_then_close) is False  # nothing is waiting here


class Counting(Service):
    """A service of the test's own: counts its steps, answers as told, fails when told."""

    name = "counting"
    interval = 60.0

    def __init__(self, answers: list[bool | Exception]) -> None:
        self.answers = answers
        self.steps = 0

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        self.steps += 1
        answer = self.answers.pop(0) if self.answers else False
        if isinstance(answer, Exception):
            raise answer
        return answer


def ticks(runner: Every, count: int, conn: Any = None) -> None:
    async def run() -> None:
        for _ in range(count):
            await runner(cast(psycopg.AsyncConnection, conn))

    asyncio.run(run())


def test_the_runner_runs_a_service_at_most_once_per_interval() -> None:
    service = Counting([])

    ticks(Every(service), 3)

    assert service.steps == 1


def test_the_runner_runs_a_service_again_at_once_while_more_is_waiting() -> None:
    service = Counting([True, True, False])

    ticks(Every(service), 5)

    assert service.steps == 3


def test_a_failed_step_is_logged_and_tried_again_after_the_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Counting([True, ValueError("broken"), True])
    runner = Every(service)

    with caplog.at_level(logging.ERROR, logger="queue_engine.worker"):
        ticks(runner, 4)

    assert service.steps == 2  # the step after the failure waits for the interval
    assert "leader service counting failed; retrying in 60.0s" in caplog.text
    runner.last -= service.interval
    ticks(runner, 1)
    assert service.steps == 3


def test_a_connection_error_goes_up_to_the_leader() -> None:
    service = Counting([psycopg.OperationalError("server closed the connection")])

    with pytest.raises(psycopg.OperationalError):
        ticks(Every(service), 1)


@pytest.mark.django_db(transaction=True)
def test_with_events_on_each_step_is_announced_to_other_connections(conninfo: str) -> None:
    service = Counting([])

    with service_steps(conninfo) as wait:
        run_service(conninfo, Every(service, events=True).__call__)

        wait("counting", timeout=2)


@pytest.mark.django_db(transaction=True)
def test_a_workers_leader_announces_the_steps_of_each_of_its_services(
    workers: Workers, conninfo: str
) -> None:
    with service_steps(conninfo) as wait:
        workers.start("--queues", "math")

        for name in NAMES:  # each runs at the leader's first tick, in this order
            wait(name, timeout=30)
