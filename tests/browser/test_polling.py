"""Where the site serves no websocket for the console, its pages poll instead, and say so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queue_engine.models import Job
from tests.support.browser import PASSWORD, Server, screenshot

SOON = 12000  # the poll runs every 5 s


@pytest.fixture
def polling_server(transactional_db: None, tmp_path: Path) -> Iterator[Server]:
    from queue_engine.console.roles import ensure_roles

    ensure_roles()
    live = Server(tmp_path, {"JOBSITE_LIVE_UPDATES": "poll"})
    yield live
    live.stop()


def signed_in(chromium: Any, server: Server, scheme: str) -> Any:
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(f"poller-{scheme}", password=PASSWORD)
    user.groups.add(Group.objects.get(name="viewer"))
    context = chromium.new_context(viewport={"width": 1360, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.sockets = []
    page.on("websocket", lambda socket: page.sockets.append(socket.url))
    page.goto(server.url + "/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(server.url + "/")
    return page


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pages_poll_where_no_websocket_is_served_and_say_so(
    chromium: Any, polling_server: Server, scheme: str
) -> None:
    Job.objects.create(kind="tests.support.jobs.number", queue="polled-a", payload={"value": 1})
    page = signed_in(chromium, polling_server, scheme)
    page.goto(f"{polling_server.url}/queues/")
    page.wait_for_selector("#queue-rows :text('polled-a')")
    indicator = page.locator("[data-live]")

    Job.objects.create(kind="tests.support.jobs.number", queue="polled-b", payload={"value": 2})
    page.wait_for_selector("#queue-rows :text('polled-b')", timeout=SOON)
    screenshot(page, f"queues-polling-{scheme}")

    assert indicator.inner_text() == "Every 5 s"
    assert "websocket" in (indicator.get_attribute("title") or "")
    assert page.sockets == []
