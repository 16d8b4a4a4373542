"""Whether an open websocket's user may still see the console.

A socket is authorised when it connects; this re-reads the session, the user
and the viewer permission in one statement, so an open page stops updating
within seconds of a logout elsewhere, a deactivation or a lost role. Sockets
of one session share a recent answer.
"""

from __future__ import annotations

import time
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.utils.crypto import constant_time_compare

from queue_engine import sql
from queue_engine.console.roles import VIEW

SIGNED_OUT = 4401  # the session ended, or its user is inactive or gone: sign in again
NOT_A_VIEWER = 4403  # still signed in, but without the console's viewer role

SHARE_FOR = 1.0  # seconds an answer serves the other sockets of the same session

answers: dict[tuple[str, int], tuple[float, int | None]] = {}


async def access_lost(session_key: str | None, user_id: int, *, fresh: bool) -> int | None:
    """The close code for a socket whose user may no longer see the console, else None.

    `fresh` reads the database now; otherwise an answer at most SHARE_FOR old will do.
    """
    if not session_key:
        return SIGNED_OUT
    key = (session_key, user_id)
    now = time.monotonic()
    if not fresh and key in answers and now - answers[key][0] < SHARE_FOR:
        return answers[key][1]
    for stale in [k for k, (at, _) in answers.items() if now - at >= SHARE_FOR]:
        del answers[stale]
    answer: int | None = await database_sync_to_async(read_standing)(session_key, user_id)
    answers[key] = (now, answer)
    return answer


def read_standing(session_key: str, user_id: int) -> int | None:
    app_label, codename = VIEW.split(".")
    params: dict[str, str | int] = {
        "session_key": session_key,
        "user_id": user_id,
        "app_label": app_label,
        "codename": codename,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.SESSION_STANDING, params)
        row = cursor.fetchone()
    if row is None:
        return SIGNED_OUT
    session_data, password, may_view = row
    if not session_names_user(SessionStore().decode(session_data), user_id, password):
        return SIGNED_OUT
    return None if may_view else NOT_A_VIEWER


def session_names_user(data: dict[str, Any], user_id: int, password: str) -> bool:
    """The check django.contrib.auth.get_user makes: the session holds this user and a
    hash of their current password (so a password change elsewhere signs it out)."""
    stored = data.get(HASH_SESSION_KEY)
    if data.get(SESSION_KEY) != str(user_id) or not isinstance(stored, str):
        return False
    user = get_user_model()(pk=user_id, password=password)
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return any(constant_time_compare(stored, h) for h in hashes)
