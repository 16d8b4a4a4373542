"""The console's websockets: who may connect, and hints from Postgres arriving as fragments."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import override_settings

from queue_engine import ops
from queue_engine.console import socket_access
from queue_engine.console.bridge import messages_for
from queue_engine.console.consumers import LiveConsumer
from queue_engine.models import Job, JobLog
from tests.support.sockets import (
    SignIn,
    application,
    closed_with,
    cookie_for,
    notify,
    receive_until,
    socket,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_anonymous_sockets_are_closed_as_signed_out(stop_bridge: None) -> None:
    communicator = socket("/ws/overview/")

    assert await closed_with(communicator) == socket_access.SIGNED_OUT


async def test_users_without_a_console_role_are_closed_as_not_viewers(
    session_cookie, stop_bridge
) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)(None)
    communicator = socket("/ws/overview/", (b"cookie", cookie))

    assert await closed_with(communicator) == socket_access.NOT_A_VIEWER


async def test_other_sites_cannot_open_a_socket(session_cookie, stop_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = WebsocketCommunicator(
        application,
        "/ws/overview/",
        headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)],
    )

    connected, _ = await communicator.connect()

    assert not connected


async def test_a_job_socket_catches_up_on_connect(session_cookie, stop_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    job = await Job.objects.acreate(kind="tests.noop", queue="ws", name="catch me up")
    communicator = socket(f"/ws/jobs/{job.id}/", (b"cookie", cookie))

    connected, _ = await communicator.connect()
    message = await receive_until(communicator, 'id="job-state"')

    assert connected
    assert 'hx-swap-oob="true"' in message
    assert "catch me up" in message
    assert 'id="log-lines"' in message
    await communicator.disconnect()


async def test_a_job_socket_pushes_secrets_masked(session_cookie, stop_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    job = await Job.objects.acreate(
        kind="tests.noop",
        queue="ws",
        meta={"dsn": "postgres://u:ws-SECRET@h/db", "db_pass": "ws-PASS", "tenant": "acme"},
    )
    communicator = socket(f"/ws/jobs/{job.id}/", (b"cookie", cookie))

    await communicator.connect()
    message = await receive_until(communicator, 'id="job-result"')

    assert "postgres://u:********@h/db" in message and "acme" in message
    assert "ws-SECRET" not in message and "ws-PASS" not in message
    await communicator.disconnect()


async def test_a_log_hint_appends_the_new_lines(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    job = await Job.objects.acreate(kind="tests.noop", queue="ws", state="running")
    communicator = socket(f"/ws/jobs/{job.id}/", (b"cookie", cookie))
    await communicator.connect()
    await receive_until(communicator, 'id="job-state"')

    await JobLog.objects.acreate(
        job_id=job.id, attempt=1, seq=1, stream="stderr", text="<b>disk</b> almost full"
    )
    await database_sync_to_async(notify)({"type": "log", "ids": [job.id]})
    message = await receive_until(communicator, "almost full")

    assert 'hx-swap-oob="beforeend"' in message
    assert "&lt;b&gt;disk&lt;/b&gt; almost full" in message
    assert 'class="log-line stream-stderr stderr"' in message
    await communicator.disconnect()


async def test_an_operator_action_updates_the_job_state(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("operator")
    job = await Job.objects.acreate(kind="tests.noop", queue="ws")
    communicator = socket(f"/ws/jobs/{job.id}/", (b"cookie", cookie))
    await communicator.connect()
    await receive_until(communicator, 'id="job-state"')

    await database_sync_to_async(ops.cancel_job)(job.id, actor="someone")
    message = await receive_until(communicator, "s-cancelled")

    assert 'id="job-state"' in message
    assert "cancelled by someone" in message  # the attempts section came too
    assert 'value="redrive"' in message  # operators get the actions that now apply
    await communicator.disconnect()


async def test_overview_counters_follow_enqueues(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/overview/", (b"cookie", cookie))
    await communicator.connect()
    await receive_until(communicator, 'id="queues"')

    await Job.objects.acreate(kind="tests.noop", queue="brand-new-queue")
    message = await receive_until(communicator, "brand-new-queue")

    assert 'id="summary"' in message
    await communicator.disconnect()


async def test_hidden_tabs_get_nothing_until_visible_again(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/overview/", (b"cookie", cookie))
    await communicator.connect()
    await receive_until(communicator, 'id="queues"')

    await communicator.send_to(text_data=json.dumps({"visible": False}))
    await asyncio.sleep(0.05)
    await Job.objects.acreate(kind="tests.noop", queue="while-hidden")
    assert await communicator.receive_nothing(timeout=1.0)
    await communicator.send_to(text_data=json.dumps({"visible": True}))

    assert "while-hidden" in await receive_until(communicator, "while-hidden")
    await communicator.disconnect()


def test_notifications_map_to_groups() -> None:
    assert messages_for("qe_wake", "emails") == [
        ("qe.overview", {"type": "console.hint", "kind": "jobs"})
    ]
    assert [g for g, _ in messages_for("qe_events", '{"type": "log", "ids": [4, 5]}')] == [
        "qe.job.4",
        "qe.job.5",
    ]
    assert [g for g, _ in messages_for("qe_events", '{"type": "jobs", "ids": [4]}')] == [
        "qe.job.4",
        "qe.overview",
    ]
    assert messages_for("qe_events", "not json") == []


async def test_anonymous_jobs_list_sockets_are_closed_as_signed_out(stop_bridge: None) -> None:
    communicator = socket("/ws/jobs/")

    assert await closed_with(communicator) == socket_access.SIGNED_OUT


async def test_jobs_list_pushes_only_the_rows_that_changed(session_cookie, live_bridge) -> None:  # type: ignore[no-untyped-def]
    cookie = await database_sync_to_async(session_cookie)("operator")
    moving = await Job.objects.acreate(kind="tests.noop", queue="ws", name="will be cancelled")
    still = await Job.objects.acreate(kind="tests.noop", queue="ws", name="stays put")
    communicator = socket("/ws/jobs/", (b"cookie", cookie))
    await communicator.connect()
    rows = [[moving.id, "available:0"], [still.id, "available:0"]]
    await communicator.send_to(text_data=json.dumps({"rows": rows, "query": "queue=ws"}))

    await database_sync_to_async(ops.cancel_job)(moving.id, actor="someone")
    message = await receive_until(communicator, f'id="job-row-{moving.id}"')

    assert 'hx-swap-oob="true"' in message
    assert "s-cancelled" in message
    assert 'class="changed"' in message
    assert f'name="ids" value="{moving.id}"' in message  # operators keep their checkbox
    assert f"job-row-{still.id}" not in message
    assert await communicator.receive_nothing(timeout=2.5)  # the timer sends nothing new
    await communicator.disconnect()


async def test_jobs_list_counts_newer_jobs_instead_of_inserting_them(  # type: ignore[no-untyped-def]
    session_cookie, live_bridge
) -> None:
    cookie = await database_sync_to_async(session_cookie)("viewer")
    shown = await Job.objects.acreate(kind="tests.noop", queue="ws-new")
    communicator = socket("/ws/jobs/", (b"cookie", cookie))
    await communicator.connect()
    query = {"rows": [[shown.id, "available:0"]], "query": "queue=ws-new"}
    await communicator.send_to(text_data=json.dumps(query))

    await Job.objects.acreate(kind="tests.noop", queue="elsewhere")
    newer = await Job.objects.acreate(kind="tests.noop", queue="ws-new")
    message = await receive_until(communicator, 'id="jobs-newer"')

    assert "1 new job — show" in message
    assert 'href="/jobs/?queue=ws-new"' in message
    assert f"job-row-{newer.id}" not in message
    await communicator.disconnect()


async def test_a_live_update_past_the_statement_timeout_is_skipped(  # type: ignore[no-untyped-def]
    session_cookie, live_bridge, monkeypatch, caplog
) -> None:
    # The socket's first update meets a slow database: it must be cut off at the
    # console's statement timeout, not hold a connection for as long as it likes, and
    # the socket must go on with the next update.
    from queue_engine.console.consumers import OverviewConsumer

    renders: list[set[str]] = []
    render = OverviewConsumer.render

    def slow_first(self: OverviewConsumer, dirty: set[str]) -> str:
        renders.append(dirty)
        if len(renders) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(10)")
            return "the slow update"
        return render(self, dirty)

    monkeypatch.setattr(OverviewConsumer, "render", slow_first)
    cookie = await database_sync_to_async(session_cookie)("viewer")
    loop = asyncio.get_running_loop()
    with override_settings(QUEUE_ENGINE={"CONSOLE_STATEMENT_TIMEOUT": 0.3}):
        communicator = socket("/ws/overview/", (b"cookie", cookie))
        started = loop.time()
        await communicator.connect()
        await asyncio.sleep(1.0)
        # The ORM shares the consumers' database thread: this waits for the slow update.
        await Job.objects.acreate(kind="tests.noop", queue="after-the-slow-one")
        await receive_until(communicator, "after-the-slow-one", timeout=4)
        elapsed = loop.time() - started
        await communicator.disconnect()

    assert elapsed < 6, f"the slow update held the database for {elapsed:.1f}s"
    assert "ran past CONSOLE_STATEMENT_TIMEOUT" in caplog.text


# --- access lost while the socket is open -----------------------------------------------


async def open_socket(signed_in: SignIn, role: str, path: str = "/ws/overview/") -> Any:
    """A socket that has had its first push (the jobs list's waits for the page's rows),
    its user and their session key."""
    user, session_key = await database_sync_to_async(signed_in)(role)
    communicator = socket(path, (b"cookie", cookie_for(session_key)))
    connected, _ = await communicator.connect()
    assert connected
    if path != "/ws/jobs/":
        await receive_until(communicator, "hx-swap-oob")
    return communicator, user, session_key


async def close_code(communicator: WebsocketCommunicator, timeout: float) -> int:
    """The code the server closes the socket with, within `timeout` seconds; fragments
    pushed before it are skipped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        try:
            output = await communicator.receive_output(timeout=left)
        except TimeoutError:
            break
        if output["type"] == "websocket.close":
            return int(output.get("code", 1000))
    raise AssertionError(f"the socket was still open {timeout}s later")


# How a user loses access while a page is open, and the code the page's socket closes with.
LOSING_ACCESS: dict[str, tuple[Callable[[User, str], Awaitable[object]], int]] = {
    "leaves the viewer group": (lambda user, _: user.groups.aclear(), 4403),
    "is made inactive": (
        lambda user, _: User.objects.filter(pk=user.pk).aupdate(is_active=False),
        4401,
    ),
    "is signed out elsewhere": (
        lambda _, key: Session.objects.filter(session_key=key).adelete(),
        4401,
    ),
}


@pytest.mark.parametrize("how", LOSING_ACCESS)
async def test_an_open_socket_closes_within_5s_when_its_user(  # type: ignore[no-untyped-def]
    how, signed_in, stop_bridge
) -> None:
    change, expected_code = LOSING_ACCESS[how]
    job = await Job.objects.acreate(kind="tests.noop", queue="ws")
    communicator, user, session_key = await open_socket(signed_in, "viewer", f"/ws/jobs/{job.id}/")
    loop = asyncio.get_running_loop()

    changed_at = loop.time()
    await change(user, session_key)
    code = await close_code(communicator, timeout=6)
    after = loop.time() - changed_at

    assert code == expected_code
    assert after < 5
    await communicator.disconnect()


async def test_a_message_from_the_page_checks_access_at_once(  # type: ignore[no-untyped-def]
    signed_in, stop_bridge, monkeypatch
) -> None:
    monkeypatch.setattr(LiveConsumer, "access_every", 60.0)  # only the message can notice
    job = await Job.objects.acreate(kind="tests.noop", queue="ws", name="still secret")
    communicator, _, session_key = await open_socket(signed_in, "viewer", "/ws/jobs/")
    await Session.objects.filter(session_key=session_key).adelete()

    rows = {"rows": [[job.id, "stale:0"]], "query": "queue=ws"}
    await communicator.send_to(text_data=json.dumps(rows))
    output = await communicator.receive_output(timeout=1)

    assert output == {"type": "websocket.close", "code": socket_access.SIGNED_OUT}
    assert await communicator.receive_nothing(timeout=0.5)  # and no row was rendered
    await communicator.disconnect()


async def test_sockets_of_people_still_allowed_stay_open(  # type: ignore[no-untyped-def]
    signed_in, stop_bridge, monkeypatch
) -> None:
    monkeypatch.setattr(LiveConsumer, "access_every", 0.2)
    communicator, _, _ = await open_socket(signed_in, "operator")

    await communicator.send_to(text_data=json.dumps({"visible": True}))

    await receive_until(communicator, 'id="queues"')
    assert await communicator.receive_nothing(timeout=1.0)
    await communicator.disconnect()


def test_a_password_change_elsewhere_signs_the_session_out(signed_in: SignIn) -> None:
    user, session_key = signed_in("viewer")
    assert socket_access.read_standing(session_key, user.pk) is None

    user.set_password("a new one")
    user.save()

    assert socket_access.read_standing(session_key, user.pk) == socket_access.SIGNED_OUT


def test_superusers_need_no_group(signed_in: SignIn) -> None:
    user, session_key = signed_in(None)
    assert socket_access.read_standing(session_key, user.pk) == socket_access.NOT_A_VIEWER

    User.objects.filter(pk=user.pk).update(is_superuser=True)

    assert socket_access.read_standing(session_key, user.pk) is None


def test_a_session_of_another_user_is_not_theirs(signed_in: SignIn) -> None:
    user, _ = signed_in("viewer")
    _, someone_elses = signed_in("viewer")

    assert socket_access.read_standing(someone_elses, user.pk) == socket_access.SIGNED_OUT
