"""The console's websockets in tests: the ASGI application, sockets opened on it with a
session cookie, and what they receive."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connection

from queue_engine import sql

ORIGIN = (b"origin", b"http://testserver")
SignIn = Callable[[str | None], tuple[User, str]]


def asgi_application() -> Any:
    """jobsite.asgi's application, without the JOBSITE_DB_POOL=1 it sets for daphne.

    Settings are loaded already, so the variable would change nothing here, but
    subprocesses started by later tests would inherit it.
    """
    before = os.environ.get("JOBSITE_DB_POOL")
    from jobsite.asgi import application

    if before is None:
        os.environ.pop("JOBSITE_DB_POOL", None)
    return application


application = asgi_application()


def cookie_for(session_key: str) -> bytes:
    return f"sessionid={session_key}".encode()


def socket(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[ORIGIN, *headers])


async def receive_until(
    communicator: WebsocketCommunicator, needle: str, timeout: float = 5.0
) -> str:
    """Messages until one contains `needle`; fails after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = []
    while (left := deadline - loop.time()) > 0:
        try:
            message = await communicator.receive_from(timeout=left)
        except TimeoutError:
            break
        if needle in message:
            return message
        seen.append(message[:200])
    raise AssertionError(f"no message with {needle!r} within {timeout}s; got {seen}")


def notify(payload: dict[str, object]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql.NOTIFY_EVENT, [json.dumps(payload)])


async def closed_with(communicator: WebsocketCommunicator) -> int:
    """Connect, and return the code the server closed with before it sent anything."""
    connected, _ = await communicator.connect()
    assert connected
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return int(message["code"])
