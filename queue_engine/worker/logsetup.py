"""The worker's own log (queue_engine.worker): one stderr handler, for a worker or a supervisor."""

from __future__ import annotations

import logging
import sys


def configure_logging(verbosity: int) -> None:
    logger = logging.getLogger("queue_engine.worker")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.__stderr__)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    logger.propagate = False
