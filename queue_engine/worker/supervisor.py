"""`runworker --processes N`: start N worker processes, restart any that dies."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

from queue_engine.worker.logsetup import LogFormat, configure_logging

log = logging.getLogger("queue_engine.worker")


def child_argv(argv: list[str], index: int) -> list[str]:
    args = [sys.executable, "-m", "django", "runworker"]
    rest = argv[argv.index("runworker") + 1 :] if "runworker" in argv else argv[1:]
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        if arg in ("--processes", "--worker-id"):
            skip = True
            continue
        if arg.startswith(("--processes=", "--worker-id=")):
            continue
        args.append(arg)
    base = next((a.split("=", 1)[1] for a in rest if a.startswith("--worker-id=")), None)
    if base is None and "--worker-id" in rest:
        base = rest[rest.index("--worker-id") + 1]
    if base:
        args += ["--worker-id", f"{base}-{index}"]
    return args


def supervise(count: int, argv: list[str], log_format: LogFormat = "text") -> int:
    configure_logging(1, log_format)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobsite.settings")
    stopping = False
    children: dict[int, subprocess.Popen[bytes]] = {}
    burst = "--burst" in argv

    def start(index: int) -> None:
        children[index] = subprocess.Popen(child_argv(argv, index))
        log.info("supervisor: started worker %d (pid %d)", index, children[index].pid)

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for index in range(count):
        start(index)
    worst = 0
    while children:
        time.sleep(0.2)
        for index, child in list(children.items()):
            code = child.poll()
            if code is None:
                continue
            del children[index]
            if stopping or (burst and code == 0):
                worst = max(worst, code)
                continue
            log.warning("supervisor: worker %d exited with %s; restarting", index, code)
            time.sleep(0.5)
            start(index)
    return worst
