"""GET /metrics in tests: the token to scrape with (tests/console/conftest.py's metrics_on
sets it), and a scrape read back as samples."""

from __future__ import annotations

from typing import Any

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "scrape-me-7f3a"


def scrape(token: str | None = TOKEN, address: str = "127.0.0.1", forwarded: str = "") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    return Client(REMOTE_ADDR=address).get("/metrics", headers=headers)


def samples(response: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = response.content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
