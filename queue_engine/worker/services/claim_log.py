"""Prunes the claim log, which rate limits read: only its recent rows matter."""

from __future__ import annotations

import psycopg

from queue_engine import sql


async def prune_claim_log(conn: psycopg.AsyncConnection) -> None:
    await conn.execute(sql.PRUNE_CLAIM_LOG)
