"""The project's settings plus schedules, for workers started by tests/test_schedules.py."""

from jobsite.settings import *  # noqa: F403
from jobsite.settings import QUEUE_ENGINE

QUEUE_ENGINE = {
    **QUEUE_ENGINE,
    "SCHEDULES": {
        "from-settings": {"kind": "tests.noop", "every": 1, "payload": {"at": "{fire_time}"}},
    },
}
