"""Job kinds the browser tests run on a real worker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from queue_engine import Fatal, job


@job(kind="browser.log_on_signal", queue="browser")
def log_on_signal(ctx: Any, go: str, done: str, line: str) -> str:
    """Wait for the file `go`, print `line`, then wait for `done` (at most 30 s)."""
    deadline = time.monotonic() + 30
    ctx.progress(0.1, "waiting for the signal")
    while not Path(go).exists() and time.monotonic() < deadline:
        ctx.sleep(0.02)
    print(line)
    ctx.progress(0.9, "signalled")
    while not Path(done).exists() and time.monotonic() < deadline:
        ctx.sleep(0.05)
    return "done"


@job(kind="browser.gate", queue="flows")
def gate(ctx: Any, go: str) -> dict[str, str]:
    """Run until the file `go` exists (at most 30 s): a flow node held open by the test."""
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        ctx.sleep(0.02)
    return {"gate": "open"}


@job(kind="browser.fails_until", queue="flows")
def fails_until(ctx: Any, marker: str) -> int:
    """Dead at once (Fatal) until the file `marker` exists, then returns 1."""
    if not Path(marker).exists():
        raise Fatal("the card was declined (create the marker file to fix it)")
    return 1
