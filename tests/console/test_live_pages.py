"""The list pages' socket (`/ws/pages/<page>/`): who may connect, what it sends and when."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from queue_engine.console import socket_access
from queue_engine.models import Job
from tests.support.sockets import closed_with, receive_until, socket

pytestmark = pytest.mark.django_db(transaction=True)


async def test_anonymous_page_sockets_are_closed_as_signed_out(stop_bridge: None) -> None:
    communicator = socket("/ws/pages/queues/")

    assert await closed_with(communicator) == socket_access.SIGNED_OUT


async def test_an_unknown_page_is_refused(session_cookie, stop_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/pages/settings/", (b"cookie", cookie))

    connected, _ = await communicator.connect()

    assert not connected


async def test_a_page_gets_its_rows_once_it_says_its_filter_and_only_changes_after(  # type: ignore[no-untyped-def]
    session_cookie,
    live_bridge,
) -> None:
    # Scheduled, not available: an available job's waiting time grows, and is news.
    later = timezone.now() + timedelta(hours=1)
    await Job.objects.acreate(kind="tests.noop", queue="alpha", state="scheduled", run_at=later)
    await Job.objects.acreate(kind="tests.noop", queue="beta", state="scheduled", run_at=later)
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/pages/queues/", (b"cookie", cookie))
    await communicator.connect()
    before_filter = await communicator.receive_nothing(timeout=0.5)

    await communicator.send_to(text_data=json.dumps({"query": "sort=-name"}))
    rows = await receive_until(communicator, 'id="queue-rows"')
    unchanged = await communicator.receive_nothing(timeout=2.5)  # past a timer tick
    await Job.objects.acreate(kind="tests.noop", queue="gamma")
    update = await receive_until(communicator, "gamma")
    await communicator.disconnect()

    assert before_filter
    assert 'hx-swap-oob="true"' in rows
    assert rows.index(">beta<") < rows.index(">alpha<")  # sorted as the page asked
    assert unchanged
    assert update.index(">gamma<") < update.index(">beta<")


async def test_a_hidden_page_reads_nothing_until_visible(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/pages/queues/", (b"cookie", cookie))
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"query": ""}))
    await receive_until(communicator, 'id="queue-rows"')

    await communicator.send_to(text_data=json.dumps({"visible": False}))
    await Job.objects.acreate(kind="tests.noop", queue="while-hidden")
    hidden = await communicator.receive_nothing(timeout=2.5)
    await communicator.send_to(text_data=json.dumps({"visible": True}))
    shown = await receive_until(communicator, "while-hidden")
    await communicator.disconnect()

    assert hidden
    assert "while-hidden" in shown
