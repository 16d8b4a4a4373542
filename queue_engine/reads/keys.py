"""A queue's group keys: what each one waits and runs, its recent starts and its share of
the queue's, its cap, and (when the queue's rate limit applies per key) its rate budget;
the queue page's keys panel."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from queue_engine import sql
from queue_engine.models import GroupLimit, GroupWeight, QueueConfig

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
    rate: int | None = None  # its starts allowed per rate window, when the limit is per key
    rate_used: int = 0  # of those, started in the current window
    weight: int | None = None  # its turns for another key's one, in a fair queue

    @property
    def rate_left(self) -> int | None:
        return None if self.rate is None else max(self.rate - self.rate_used, 0)


@dataclass(frozen=True)
class QueueKeys:
    queue: str
    keys: list[KeyStats]
    total: int  # keys with jobs waiting or running, or started in the window
    window: int
    rate_window: int | None = None  # seconds, when the queue's rate limit applies per key
    fair: bool = False  # claims take turns between the keys (fair_share)


def queue_keys(queue: str, *, limit: int = KEYS_SHOWN, window: int = SHARE_WINDOW) -> QueueKeys:
    """The queue's keys with jobs waiting or running (or that started jobs in the last
    `window` seconds), busiest first, at most `limit`."""
    with connection.cursor() as cursor:
        cursor.execute(sql.QUEUE_KEYS, {"queue": queue, "limit": limit, "window": window})
        rows = cursor.fetchall()
    config = QueueConfig.objects.filter(name=queue).first()
    default = config.group_concurrency if config else None
    names = [r[0] for r in rows]
    own = {g.group_key: g for g in GroupLimit.objects.filter(queue=queue, group_key__in=names)}
    per_key = config if config is not None and config.rate_limit_per_key else None
    used: dict[str, int] = {}
    if per_key is not None and names:
        with connection.cursor() as cursor:
            cursor.execute(
                sql.KEYS_RATE_USED, {"queue": queue, "keys": names, "window": per_key.rate_window}
            )
            used = dict(cursor.fetchall())

    def limits(key: str) -> tuple[int | None, int | None]:
        limit = own.get(key)
        cap = limit.max_concurrency if limit and limit.max_concurrency is not None else default
        if per_key is None:
            return cap, None
        rate = limit.rate_limit if limit and limit.rate_limit is not None else per_key.rate_limit
        return cap, rate

    fair = config is not None and config.fair_share
    weights = (
        dict(
            GroupWeight.objects.filter(queue=queue, group_key__in=names).values_list(
                "group_key", "weight"
            )
        )
        if fair
        else {}
    )
    keys = []
    for key, waiting, running, started, all_started, _total in rows:
        cap, rate = limits(key)
        keys.append(
            KeyStats(
                key=key,
                waiting=waiting,
                running=running,
                started=started,
                share=started / all_started if all_started else 0.0,
                cap=cap,
                rate=rate,
                rate_used=used.get(key, 0),
                weight=weights.get(key, 1) if fair else None,
            )
        )
    return QueueKeys(
        queue=queue,
        keys=keys,
        total=rows[0][5] if rows else 0,
        window=window,
        rate_window=per_key.rate_window if per_key is not None else None,
        fair=fair,
    )
