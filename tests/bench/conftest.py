"""The bench's own harness (its sampler, deadlines and baseline loops): the same on every
Postgres version, so CI runs these tests against one only."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/bench/" in str(item.fspath):
            item.add_marker(pytest.mark.once)
