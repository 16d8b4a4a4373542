from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """A test database per test run, so that runs on one server never share one."""
    from django.conf import settings

    suffix = os.environ.get("JOBSITE_TEST_DB_SUFFIX") or str(os.getpid())
    for config in settings.DATABASES.values():
        test = config.setdefault("TEST", {})
        test["NAME"] = f"{test.get('NAME') or 'test_' + config['NAME']}_{suffix}"


@pytest.fixture
def conninfo(db: None) -> str:
    """libpq connection string of the test database, for a second, independent connection."""
    from queue_engine.connections import conninfo as make

    return make()


@pytest.fixture
def other_connection(conninfo: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        yield conn


@pytest.fixture
def workers(transactional_db: None, tmp_path, request):  # type: ignore[no-untyped-def]
    """Real runworker subprocesses on the test database, stopped before the tables are flushed."""
    from tests.support.workers import Workers

    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(pool.output())


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    """make_user(role, password=None): a user in a console role ("viewer", "operator") or none."""
    from django.contrib.auth.models import Group, User

    from queue_engine.console.roles import ensure_roles

    ensure_roles()

    def make(role: str | None, password: str | None = None) -> User:
        # No password unless a test logs in with one: hashing is slow on purpose.
        user = User.objects.create_user(f"user-{role}", password=password)
        if role is not None:
            user.groups.add(Group.objects.get(name=role))
        return user

    return make


@pytest.fixture
def viewer(make_user: Callable[..., Any]) -> Any:
    from tests.support.console_users import client_for

    return client_for(make_user("viewer"))


@pytest.fixture
def operator(make_user: Callable[..., Any]) -> Any:
    from tests.support.console_users import client_for

    return client_for(make_user("operator"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def executions(transactional_db: None) -> Iterator[None]:
    """The table the test job kinds record their runs in (tests.support.jobs.record_execution)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions")
        cursor.execute("CREATE TABLE test_executions (job_id bigint, attempt int, pid int)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions")


@pytest.fixture
def added_leaves(transactional_db: None) -> Iterator[list[str]]:
    """Leaves of the partitioned history a test adds for past finish times, dropped after
    it: the flush between tests empties the history but keeps its leaves, and the next
    test's past rows would land in them rather than in the default leaves."""
    from django.db import connection

    names: list[str] = []
    yield names
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")
