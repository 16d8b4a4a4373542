"""Ctrl-C on `make run`, typed into a real pseudo-terminal as a user would."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from queue_engine.models import Job, JobRecord, WorkerProcess
from tests.support import jobs, workers
from tests.support.workers import ROOT, wait_for

pytestmark = pytest.mark.slow

CTRL_C = b"\x03"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def process_table() -> dict[int, tuple[int, str, str]]:
    """pid: (parent pid, state, start time) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry.name)] = (int(fields[1]), fields[0], fields[19])
    return table


class MakeRun:
    """`make run SETUP=` on the test database, in a session of its own whose controlling
    terminal is a pseudo-terminal: a Ctrl-C written to it reaches the foreground process
    group as SIGINT, exactly as from a user's terminal."""

    def __init__(self, **extra_env: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        env.update(
            DATABASE_URL=workers.database_url_for_tests(),
            JOBSITE_JOB_MODULES="tests.support.jobs",
            JOBSITE_DB_POOL="0",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env)
        self.terminal, user_side = os.openpty()
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "run", "SETUP=", f"PORT={self.port}"],
            cwd=ROOT,
            env=env,
            stdin=user_side,
            stdout=user_side,
            stderr=user_side,
            start_new_session=True,
            preexec_fn=take_controlling_terminal,
        )
        os.close(user_side)
        self._output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.seen: dict[int, str] = {}  # pid: start time, of every process the recipe ran

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.terminal, 4096)
            except OSError:  # EIO: the last process holding the terminal is gone
                return
            if not chunk:
                return
            self._output.extend(chunk)

    def output(self) -> str:
        return self._output.decode(errors="replace")

    def wait_until_serving(self) -> None:
        wait_for(
            lambda: listening(self.port) and WorkerProcess.objects.exists(),
            timeout=60,
            message="the site and the worker to start",
        )
        self.note_processes()

    def note_processes(self) -> None:
        table = process_table()
        family = {self.proc.pid}
        while grown := {pid for pid, (parent, _, _) in table.items() if parent in family} - family:
            family |= grown
        self.seen.update({pid: table[pid][2] for pid in family if pid in table})

    def alive(self) -> list[int]:
        table = process_table()
        return [
            pid
            for pid, started in self.seen.items()
            if pid in table and table[pid][2] == started and table[pid][1] != "Z"
        ]

    def ctrl_c(self) -> None:
        os.write(self.terminal, CTRL_C)

    def stop(self) -> None:
        self.note_processes()
        for pid in self.alive():
            os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)
        os.close(self.terminal)


def take_controlling_terminal() -> None:
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    # As in a user's terminal: a test run started in the background (`cmd &`, as CI may
    # be) inherits SIGINT ignored, and a shell cannot trap a signal ignored at its start.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture
def make_run(transactional_db: None, request: pytest.FixtureRequest) -> Iterator[MakeRun]:
    run = MakeRun(**getattr(request, "param", {}))
    yield run
    run.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(run.output())


def stopped_within(run: MakeRun, seconds: float) -> float:
    started = time.monotonic()
    try:
        run.proc.wait(seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"make run still running {seconds}s after Ctrl-C") from None
    wait_for(lambda: not run.alive(), timeout=2, message="every process of the recipe to end")
    return time.monotonic() - started


def test_ctrl_c_gives_a_running_job_its_shutdown_timeout(make_run: MakeRun) -> None:
    make_run.wait_until_serving()
    job = jobs.cooperative.enqueue(seconds=3)
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())
    make_run.note_processes()
    # The job runs on a while before Ctrl-C: the shutdown must let it finish.
    time.sleep(0.5)

    make_run.ctrl_c()
    stopped_within(make_run, 10)

    record = JobRecord.objects.get(pk=job.id)
    assert (record.state, record.result, record.attempt) == ("succeeded", "finished", 1)
    assert "second signal" not in make_run.output()
    assert make_run.proc.returncode == -signal.SIGINT
    assert "***" not in make_run.output()  # make reports no error
    assert "Traceback" not in make_run.output()
    assert not WorkerProcess.objects.exists()


def test_ctrl_c_stops_an_idle_worker_and_the_site_at_once(make_run: MakeRun) -> None:
    make_run.wait_until_serving()

    make_run.ctrl_c()
    took = stopped_within(make_run, 10)

    assert took < 3
    assert not listening(make_run.port)
    assert not WorkerProcess.objects.exists()
    assert make_run.proc.returncode == -signal.SIGINT


def test_a_second_ctrl_c_aborts_running_jobs_at_once(make_run: MakeRun) -> None:
    make_run.wait_until_serving()
    job = jobs.cooperative.enqueue(seconds=60)
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())
    make_run.note_processes()

    make_run.ctrl_c()
    # The gap between the two Ctrl-Cs is what the test is about.
    time.sleep(0.1)
    make_run.ctrl_c()
    took = stopped_within(make_run, 10)

    assert took < 3
    assert "second signal: aborting now" in make_run.output()
    assert Job.objects.get(pk=job.id).state == "running"  # comes back after its lease


def visit(port: int, paths: list[str]) -> None:
    for path in paths:
        # A 404 is what the test asks for.
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read()


PATHS = ["/login/", "/no-such-page/", "/", "/static/console/no-such.css"]


def test_make_run_prints_no_line_per_request(make_run: MakeRun) -> None:
    make_run.wait_until_serving()

    visit(make_run.port, PATHS)
    # A window: a line per request would have been printed by now.
    time.sleep(1)

    output = make_run.output()
    assert f"console: http://127.0.0.1:{make_run.port}/" in output
    assert not [line for line in output.splitlines() if any(p in line for p in PATHS[:2])]
    assert "Not Found" not in output
    assert "WARNING" not in output


@pytest.mark.parametrize("make_run", [{"JOBSITE_ACCESS_LOG": "1"}], indirect=True)
def test_jobsite_access_log_brings_the_request_lines_back(make_run: MakeRun) -> None:
    make_run.wait_until_serving()

    visit(make_run.port, PATHS)
    wait_for(lambda: "/no-such-page/" in make_run.output(), message="the request lines")

    output = make_run.output()
    assert '"GET /login/" 200' in output
    assert '"GET /no-such-page/" 404' in output
    assert re.search(r"WARNING +Not Found: /no-such-page/", output)
