"""A live daphne serving the console on the test database, and headless Chromium driving it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.support.browser import CHROMIUM, PASSWORD, Server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
            if not shutil.which(CHROMIUM):
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{CHROMIUM} is missing: `make browser` installs Chromium from Debian"
                    )
                )


@pytest.fixture
def server(
    transactional_db: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Server]:
    from queue_engine.console.roles import ensure_roles

    ensure_roles()
    live = Server(tmp_path)
    yield live
    live.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(live.output())


@pytest.fixture
def chromium(transactional_db: None) -> Iterator[Any]:
    # Per test: Playwright's sync API keeps an event loop running in this thread while it
    # is open, which would break every pytest-asyncio test that runs after it. While that
    # loop runs, Django takes this thread for async code and refuses its ORM calls (the
    # test's own, in a sync test): DJANGO_ALLOW_ASYNC_UNSAFE lets them through for that
    # time only. Subprocesses never get it (tests.support.workers.production_environ). The
    # database comes first, so its flush runs after Playwright has stopped.
    from django.db import connections
    from playwright.sync_api import sync_playwright

    with (
        sync_playwright() as playwright,
        mock.patch.dict(os.environ, {"DJANGO_ALLOW_ASYNC_UNSAFE": "true"}),
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()
        # Django keeps connections per async context, and the test ran in Playwright's:
        # its connection would stay open and keep the test database from being dropped.
        connections.close_all()


@pytest.fixture
def new_page(chromium: Any, server: Server) -> Iterator[Callable[..., Any]]:
    """A page in a fresh browser context (its own cookies), logged in with the given role."""
    from django.contrib.auth.models import Group, User

    contexts: list[Any] = []

    def make(role: str = "operator", **options: Any) -> Any:
        username = f"{role}-{len(contexts)}"
        user = User.objects.create_user(username, password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        options.setdefault("viewport", {"width": 1360, "height": 900})
        context = chromium.new_context(**options)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.goto(server.url + "/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/")
        return page

    yield make
    for context in contexts:
        context.close()
