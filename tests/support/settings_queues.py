"""The project's settings plus $TEST_QUEUE_ENGINE (JSON), for workers started by
tests/test_queue_defaults.py."""

import json
import os

from jobsite.settings import *  # noqa: F403
from jobsite.settings import QUEUE_ENGINE

QUEUE_ENGINE = {**QUEUE_ENGINE, **json.loads(os.environ.get("TEST_QUEUE_ENGINE", "{}"))}
