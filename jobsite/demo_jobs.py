"""Demo job kinds, loaded by `manage.py load_demo` and run by the demo worker."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from queue_engine import Backoff, Fatal, job


@job(
    kind="demo.send_email",
    queue="emails",
    name=lambda p: f"Email to {p['to']}",
    max_attempts=5,
    backoff=Backoff.exponential(2, 60),
)
def send_email(to: str, subject: str = "Hello") -> dict[str, Any]:
    time.sleep(random.uniform(0.05, 0.3))
    return {"delivered_to": to, "subject": subject}


@job(kind="demo.resize_image", queue="media", group_key=lambda p: p.get("account"))
async def resize_image(ctx: Any, image_id: int, account: str = "acme") -> dict[str, Any]:
    for step in range(4):
        await asyncio.sleep(0.2)
        ctx.progress((step + 1) / 4, f"pass {step + 1} of 4")
    return {"image_id": image_id, "sizes": [64, 256, 1024]}


@job(kind="demo.charge_card", queue="billing", max_attempts=3, backoff=Backoff.fixed(5))
def charge_card(order_id: int, amount_cents: int) -> None:
    if order_id % 3 == 0:
        raise Fatal(f"card for order {order_id} was declined")
    raise ConnectionError("payment gateway timed out")


@job(kind="demo.slow_report", queue="reports", idle_timeout=120)
def slow_report(ctx: Any, rows: int = 20) -> dict[str, int]:
    for i in range(rows):
        time.sleep(0.5)
        print(f"processed batch {i + 1} of {rows}")
        ctx.progress((i + 1) / rows)
    return {"rows": rows}
