"""Demo job kinds and flows: what `manage.py load_demo` seeds and its schedules keep enqueuing.

Each kind shows one thing a newcomer should see in the console: retries that
succeed, charges that end in the dead letter, a flow that fans out and joins
(statically and dynamically), a flow that fails partway, and a report that logs
a line every second.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from typing import Any, Literal

from queue_engine import Backoff, Fatal, Flow, job

log = logging.getLogger(__name__)


class CardDeclined(Fatal):
    """The bank said no: retrying cannot help, so the job goes straight to the dead letter."""


class MissingBillingAddress(Fatal):
    pass


ChargeOutcome = Literal["declined", "gateway down", "flaky", "ok"]
OUTCOMES: dict[int, ChargeOutcome] = {3: "declined", 7: "gateway down", 5: "flaky", 15: "flaky"}


def charge_outcome(order_id: int) -> ChargeOutcome:
    """How a demo charge ends, by its order number (1 in 10 fails for good, 1 in 10 once)."""
    return OUTCOMES.get(order_id % 20, "ok")


# --- emails -------------------------------------------------------------------------


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


@job(
    kind="demo.send_newsletter",
    queue="emails",
    name=lambda p: f"Newsletter, {p.get('size', 5)} readers",
)
def send_newsletter(ctx: Any, size: int = 5, edition: str = "") -> None:
    # In ctx.atomic() the emails commit with this job's success: a retry never sends twice.
    with ctx.atomic():
        send_email.enqueue_many(
            [
                {"to": f"reader{random.randrange(1000)}@example.com", "subject": f"News {edition}"}
                for _ in range(size)
            ]
        )


# --- billing ------------------------------------------------------------------------


@job(
    kind="demo.charge_card",
    queue="billing",
    name=lambda p: f"Charge order {p['order_id']}",
    max_attempts=3,
    backoff=Backoff.fixed(3),
)
def charge_card(ctx: Any, order_id: int, amount_cents: int) -> dict[str, Any]:
    outcome = charge_outcome(order_id)
    if outcome == "declined":
        raise CardDeclined(f"card for order {order_id} was declined")
    if outcome == "gateway down" or (outcome == "flaky" and ctx.attempt == 1):
        raise ConnectionError("payment gateway timed out")
    time.sleep(random.uniform(0.05, 0.2))
    return {"order_id": order_id, "charged_cents": amount_cents}


@job(
    kind="demo.take_payments",
    queue="billing",
    name=lambda p: f"Checkout of {p.get('count', 3)} orders",
)
def take_payments(ctx: Any, count: int = 3) -> None:
    with ctx.atomic():
        charge_card.enqueue_many(
            [
                {
                    "order_id": random.randrange(1000, 10000),
                    "amount_cents": random.randrange(500, 20000),
                }
                for _ in range(count)
            ]
        )


# --- reports ------------------------------------------------------------------------


@job(kind="demo.slow_report", queue="reports", idle_timeout=120, name="Sales report")
def slow_report(ctx: Any, rows: int = 20, seconds_per_row: float = 0.5) -> dict[str, int]:
    """One line a row, one row every `seconds_per_row`: the job page tails the log live."""
    for i in range(rows):
        if ctx.sleep(seconds_per_row):
            return {"rows": i}
        print(f"processed batch {i + 1} of {rows}")
        if i == rows // 2:
            print(f"batch {i + 1}: 2 orders without a currency, assumed EUR", file=sys.stderr)
        if (i + 1) % 10 == 0:
            log.info("checkpoint after %d batches", i + 1)
        ctx.progress((i + 1) / rows, f"batch {i + 1} of {rows}")
    return {"rows": rows}


# --- the catalogue flow: fan out, dynamic join, fan in --------------------------------


@job(kind="demo.import_catalogue", queue="catalogue", name=lambda p: f"Import {p['catalogue']}")
def import_catalogue(catalogue: str, images: int = 4, shelves: int = 3) -> dict[str, Any]:
    time.sleep(0.3)
    print(f"fetched {images} images and {shelves} shelves for {catalogue}")
    return {"image_ids": list(range(images)), "shelves": [f"shelf {s}" for s in "ABCDEF"[:shelves]]}


@job(kind="demo.resize_image", queue="media", group_key=lambda p: p.get("account"))
async def resize_image(ctx: Any, image_id: int, account: str = "acme") -> dict[str, Any]:
    for step in range(4):
        await asyncio.sleep(0.2)
        ctx.progress((step + 1) / 4, f"pass {step + 1} of 4")
    return {"image_id": image_id, "sizes": [64, 256, 1024]}


@job(kind="demo.plan_stock_count", queue="catalogue", name="Plan the stock count")
def plan_stock_count(ctx: Any) -> dict[str, int]:
    """Grow the join "publish" with one count per shelf the import found (a dynamic join)."""
    shelves = ctx.outputs["import"]["shelves"]
    ctx.fan_out_into("publish", count_shelf, [{"shelf": shelf} for shelf in shelves])
    return {"shelves": len(shelves)}


@job(kind="demo.count_shelf", queue="catalogue", name=lambda p: f"Count {p['shelf']}")
def count_shelf(shelf: str) -> dict[str, Any]:
    time.sleep(random.uniform(0.1, 0.4))
    return {"shelf": shelf, "items": random.randrange(5, 50)}


@job(kind="demo.publish_catalogue", queue="catalogue", name=lambda p: f"Publish {p['catalogue']}")
def publish_catalogue(ctx: Any, catalogue: str) -> dict[str, Any]:
    """The join: reads every parent's return value, static and spawned, from ctx.outputs."""
    outputs = ctx.outputs
    images = [o for k, o in outputs.items() if k.startswith("resize[")]
    counts = [o for o in outputs.values() if isinstance(o, dict) and "shelf" in o]
    print(f"publishing {catalogue}: {len(images)} images, {len(counts)} shelves counted")
    return {
        "catalogue": catalogue,
        "image_ids": sorted(o["image_id"] for o in images),
        "renditions": sum(len(o["sizes"]) for o in images),
        "shelves_counted": len(counts),
        "items_in_stock": sum(o["items"] for o in counts),
    }


def catalogue_flow(catalogue: str, *, images: int = 4, shelves: int = 3) -> Flow:
    """import → N resizes (static fan-out) + a stock count growing the join → publish."""
    flow = Flow(f"Catalogue import: {catalogue}", meta={"demo": True})
    flow.add("import", import_catalogue, catalogue=catalogue, images=images, shelves=shelves)
    resizes = flow.fan_out(
        "resize",
        resize_image,
        [{"image_id": i, "account": catalogue} for i in range(images)],
        depends_on=["import"],
    )
    flow.add("stock", plan_stock_count, depends_on=["import"])
    flow.add("publish", publish_catalogue, catalogue=catalogue, depends_on=[*resizes, "stock"])
    return flow


@job(kind="demo.start_catalogue_import", queue="catalogue", name="Start a catalogue import")
def start_catalogue_import(ctx: Any, fired_at: str = "") -> None:
    catalogue = f"drop {fired_at[11:16]}" if fired_at else "drop"
    with ctx.atomic():  # the flow is written once, with this job's success
        catalogue_flow(catalogue, images=random.randrange(3, 6)).submit()


# --- the invoicing flow: one node dies, its dependants stay blocked --------------------


@job(kind="demo.collect_orders", queue="billing", name="Collect yesterday's orders")
def collect_orders(order_ids: list[int]) -> dict[str, Any]:
    time.sleep(0.2)
    return {"orders": order_ids}


@job(kind="demo.create_invoice", queue="billing", name=lambda p: f"Invoice order {p['order_id']}")
def create_invoice(order_id: int, billing_address: str = "") -> dict[str, Any]:
    if not billing_address:
        raise MissingBillingAddress(f"order {order_id} has no billing address")
    return {"order_id": order_id, "invoice": f"INV-{order_id}"}


@job(kind="demo.email_invoices", queue="emails", name="Email the invoices")
def email_invoices(ctx: Any) -> dict[str, int]:
    return {"sent": len(ctx.outputs)}


def invoicing_flow() -> Flow:
    """collect → three invoices, one of which dies (no billing address) → email: upstream failed."""
    flow = Flow("Nightly invoicing", meta={"demo": True})
    orders = {2041: "1 Main St", 2042: "", 2043: "9 Quay Rd"}
    flow.add("collect", collect_orders, order_ids=list(orders))
    invoices = flow.fan_out(
        "invoice",
        create_invoice,
        [{"order_id": o, "billing_address": a} for o, a in orders.items()],
        depends_on=["collect"],
    )
    flow.add("email", email_invoices, depends_on=invoices)
    return flow
