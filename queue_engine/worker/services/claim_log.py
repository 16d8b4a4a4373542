"""Prunes the claim log, which rate limits read: only its recent rows matter."""

from __future__ import annotations

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service


async def prune_claim_log(conn: psycopg.AsyncConnection) -> None:
    await conn.execute(sql.PRUNE_CLAIM_LOG)


class ClaimLog(Service):
    name = "claim_log"
    interval = 30.0

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await prune_claim_log(conn)
        return False
