from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from jobsite import demo_jobs


class Command(BaseCommand):
    help = "Enqueue a handful of demo jobs so every page has something to show."

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            ids = demo_jobs.send_email.enqueue_many(
                [{"to": f"user{i}@example.com", "subject": "Welcome"} for i in range(12)]
            )
            for image_id in range(5):
                demo_jobs.resize_image.enqueue(image_id=image_id, account=f"acct{image_id % 2}")
            demo_jobs.charge_card.using(dedup_key="demo-declined").enqueue(
                order_id=3, amount_cents=1999
            )
            demo_jobs.charge_card.using(dedup_key="demo-timeout").enqueue(
                order_id=7, amount_cents=4999
            )
            demo_jobs.slow_report.using(dedup_key="demo-report").enqueue(rows=20)
            demo_jobs.send_email.using(delay=600, priority=5).enqueue(
                to="later@example.com", subject="Reminder"
            )
        self.stdout.write(f"demo jobs enqueued ({len(ids) + 10} jobs in 5 queues)")
