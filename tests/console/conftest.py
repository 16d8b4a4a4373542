"""Fixtures of the console's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from queue_engine.console.bridge import bridge
from queue_engine.console.roles import ensure_roles
from tests.support.metrics import TOKEN
from tests.support.sockets import SignIn, cookie_for


@pytest.fixture
def metrics_on(settings: Any) -> None:
    """GET /metrics answers, to the token tests.support.metrics.TOKEN."""
    settings.QUEUE_ENGINE = {**getattr(settings, "QUEUE_ENGINE", {}), "METRICS_TOKEN": TOKEN}


@pytest.fixture
async def stop_bridge() -> AsyncIterator[None]:
    yield
    await bridge.stop()


@pytest.fixture
async def live_bridge(stop_bridge: None) -> None:
    """The bridge listening before any socket opens, so its first catch-up reaches nobody."""
    bridge.ensure_started()
    await asyncio.wait_for(bridge.connected.wait(), 5)


@pytest.fixture
def signed_in(transactional_db: None) -> SignIn:
    """A new user in the given role (or none) and the key of their session."""
    ensure_roles()

    def login(role: str | None) -> tuple[User, str]:
        user = User.objects.create_user(f"ws-{role}-{User.objects.count()}")
        if role:
            user.groups.add(Group.objects.get(name=role))
        client = Client()
        client.force_login(user)
        return user, client.cookies["sessionid"].value

    return login


@pytest.fixture
def session_cookie(signed_in: SignIn) -> Callable[[str | None], bytes]:
    return lambda role: cookie_for(signed_in(role)[1])
