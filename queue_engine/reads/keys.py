"""A queue's group keys: what each one waits and runs, its recent starts and its share of
the queue's, and its cap; the queue page's keys panel."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from queue_engine import sql
from queue_engine.models import GroupLimit, QueueConfig

__all__ = ["KEYS_SHOWN", "SHARE_WINDOW", "KeyStats", "QueueKeys", "queue_keys"]

KEYS_SHOWN = 50  # keys listed at most, busiest first

SHARE_WINDOW = 60  # seconds of starts a key's share is counted over


@dataclass(frozen=True)
class KeyStats:
    key: str
    waiting: int  # available or scheduled
    running: int
    started: int  # jobs started in the last `QueueKeys.window` seconds
    share: float  # of the queue's starts in that window, 0.0 when none started
    cap: int | None  # its concurrency cap: its own (GroupLimit), else the queue's; None: none


@dataclass(frozen=True)
class QueueKeys:
    queue: str
    keys: list[KeyStats]
    total: int  # keys with jobs waiting or running, or started in the window
    window: int


def queue_keys(queue: str, *, limit: int = KEYS_SHOWN, window: int = SHARE_WINDOW) -> QueueKeys:
    """The queue's keys with jobs waiting or running (or that started jobs in the last
    `window` seconds), busiest first, at most `limit`."""
    with connection.cursor() as cursor:
        cursor.execute(sql.QUEUE_KEYS, {"queue": queue, "limit": limit, "window": window})
        rows = cursor.fetchall()
    default = (
        QueueConfig.objects.filter(name=queue).values_list("group_concurrency", flat=True).first()
    )
    own = dict(
        GroupLimit.objects.filter(queue=queue, group_key__in=[r[0] for r in rows]).values_list(
            "group_key", "max_concurrency"
        )
    )
    keys = [
        KeyStats(
            key=key,
            waiting=waiting,
            running=running,
            started=started,
            share=started / all_started if all_started else 0.0,
            cap=own.get(key, default),
        )
        for key, waiting, running, started, all_started, _total in rows
    ]
    return QueueKeys(queue=queue, keys=keys, total=rows[0][5] if rows else 0, window=window)
