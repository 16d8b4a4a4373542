"""The queue page's socket (`/ws/queues/<name>/`): its counts follow every hint, its keys
panel (a count of the queue's live keyed jobs) a slower beat."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from queue_engine.console.consumers import QueueConsumer
from queue_engine.models import Job
from tests.support.sockets import receive_until, socket

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_keys_panel_is_read_on_its_own_beat_and_the_counts_on_every_hint(  # type: ignore[no-untyped-def]
    session_cookie, live_bridge, monkeypatch
) -> None:
    monkeypatch.setattr(QueueConsumer, "keys_every", 3.0)
    await Job.objects.acreate(kind="tests.noop", queue="tenants", group_key="acme")
    cookie = await database_sync_to_async(session_cookie)("viewer")
    communicator = socket("/ws/queues/tenants/", (b"cookie", cookie))
    await communicator.connect()
    first = await receive_until(communicator, 'id="queue-keys"')

    await Job.objects.acreate(kind="tests.noop", queue="tenants", group_key="globex")
    hinted = await receive_until(communicator, 'id="queue-counts"')
    later = await receive_until(communicator, "globex", timeout=6)
    await communicator.disconnect()

    assert "acme" in first and 'id="queue-counts"' in first
    assert 'id="queue-keys"' not in hinted  # the new key waits for the panel's beat
    assert 'id="queue-keys"' in later
