from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def conninfo(db: None) -> str:
    """libpq connection string of the test database, for a second, independent connection."""
    from queue_engine.connections import conninfo as make

    return make()


@pytest.fixture
def other_connection(conninfo: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        yield conn
