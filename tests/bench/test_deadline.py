"""A scenario past its deadline ends, stops its workers and reports what it has."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.harness import BenchEnv, Result, run_scenario
from tests.support.workers import database_url_for_tests, production_environ, wait_for

ROOT = Path(__file__).resolve().parents[2]


def stuck(env: BenchEnv) -> list[Result]:
    env.keep({"scenario": "stuck", "value": 1.0, "load": "first"})
    while True:  # a wait for something that never comes
        time.sleep(1)


def test_a_scenario_past_its_deadline_reports_the_rows_it_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = BenchEnv(conninfo="", settings={})
    started = time.monotonic()

    rows = run_scenario("stuck", stuck, env, deadline=0.5)

    assert time.monotonic() - started < 2
    assert rows == [
        {"scenario": "stuck", "value": 1.0, "load": "first", "partial": True},
        {
            "scenario": "stuck",
            "error": "overdue: stopped at its deadline of 0.5 s",
            "partial": True,
        },
    ]
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == rows


def test_a_scenario_that_ends_in_time_is_not_interrupted_later() -> None:
    env = BenchEnv(conninfo="", settings={})

    rows = run_scenario(
        "quick", lambda env: [{"scenario": "quick", "value": 2.0}], env, deadline=0.3
    )
    time.sleep(0.5)  # past the deadline: nothing goes off

    assert rows == [{"scenario": "quick", "value": 2.0}]


# A bench whose scenario hangs on its way out too: it started a process group (a fleet)
# and its cleanup never ends.
HANGS_ON_THE_WAY_OUT = """
import subprocess, sys, time
from bench.deadline import process_groups
from bench.harness import BenchEnv, run_scenario

def stuck(env):
    fleet = subprocess.Popen(["sleep", "60"], start_new_session=True)
    process_groups.add(fleet.pid)
    print(fleet.pid, file=sys.stderr, flush=True)
    env.keep({"scenario": "stuck", "value": 1.0})
    try:
        while True:
            # Stuck on purpose, until the bench's deadline kills it.
            time.sleep(1)
    finally:
        while True:  # a fleet that never stops
            # Stuck on purpose, until the bench's deadline kills it.
            time.sleep(1)

run_scenario("stuck", stuck, BenchEnv(conninfo="", settings={}), deadline=0.5, grace=1.0)
"""


def test_a_scenario_that_hangs_on_its_way_out_is_ended_with_its_processes() -> None:
    started = time.monotonic()

    done = subprocess.run(
        [sys.executable, "-c", HANGS_ON_THE_WAY_OUT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert time.monotonic() - started < 10
    assert done.returncode == 1
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows == [
        {"scenario": "stuck", "value": 1.0, "partial": True},
        {
            "scenario": "stuck",
            "error": "overdue: did not stop within 1 s of its deadline (0.5 s)",
            "partial": True,
        },
    ]
    [fleet] = [int(line) for line in done.stderr.splitlines() if line.isdigit()]
    wait_for(lambda: not alive(fleet), timeout=5, message="the fleet to be killed")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def runworkers(pid: int) -> list[int]:
    """The runworker processes `pid` started (each leads a process group of its own)."""
    return [p for p in children(pid) if alive(p) and b"runworker" in cmdline(p)]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_a_steady_run_whose_workers_stop_answering_ends_at_its_deadline(tmp_path: Path) -> None:
    """A smoke run of `steady` (1 s loads) whose fleet is killed after the first load:
    the second load's jobs never finish, and the run ends at its deadline with the
    first load's row and a row saying it was overdue, both marked partial."""
    database = f"jobsite_bench_deadline_{os.getpid()}"
    url = database_url_for_tests()
    env = {**production_environ(), "DATABASE_URL": url, "JOBSITE_BENCH_DB": database}
    argv = [sys.executable, "-m", "bench", "steady", "--repeats", "1", "--duration", "1"]
    argv += ["--rate", "20", "--deadline", "25"]
    log = tmp_path / "stderr"
    with log.open("w") as err:
        bench = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
    try:
        give_up = time.monotonic() + 90
        while "steady at 20/s" not in log.read_text():
            assert bench.poll() is None and time.monotonic() < give_up, log.read_text()
            # This wait's poll interval.
            time.sleep(0.1)
        fleet = runworkers(bench.pid)
        for pid in fleet:
            os.killpg(pid, signal.SIGKILL)  # the workers stop answering
        killed_at = time.monotonic()

        out, _ = bench.communicate(timeout=90)

        assert time.monotonic() - killed_at < 25, log.read_text()
        rows: list[dict[str, Any]] = [json.loads(line) for line in out.splitlines()]
        assert [(r.get("load"), r.get("partial")) for r in rows] == [
            ("half_drain", True),
            (None, True),
        ], log.read_text()
        assert rows[0]["settings"]["n"] == 20
        assert rows[1]["error"] == "overdue: stopped at its deadline of 25 s"
        assert bench.returncode == 1
        assert fleet and not [p for p in fleet if alive(p)]
        assert not runworkers(bench.pid)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        with psycopg.connect(url, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
