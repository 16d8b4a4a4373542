"""Set-up a newcomer relies on: the embedded Postgres and clear connection errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from jobsite import devdb

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | env
    full_env["JOBSITE_DB_POOL"] = "0"  # as manage.py runs it, whatever an earlier test set
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_embedded_postgres_starts_then_is_reused_and_stops(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    try:
        url = devdb.embedded_url(data_dir)
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        started = time.monotonic()

        again = devdb.embedded_url(data_dir)

        assert again == url
        assert time.monotonic() - started < 0.5
        assert devdb.stop(data_dir) is True
        assert devdb.stop(data_dir) is False
        restarted = devdb.embedded_url(data_dir)
        with psycopg.connect(restarted) as conn:
            assert conn.execute("SELECT x FROM kept").fetchone() == (42,)
    finally:
        devdb.stop(data_dir)


def test_unreachable_server_gives_one_clear_line() -> None:
    result = manage("migrate", "--check", DATABASE_URL="postgresql://postgres@127.0.0.1:1/nope")

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobsite: cannot connect to Postgres at postgres@127.0.0.1:1/nope")
    assert "from DATABASE_URL" in lines[0] and "unset DATABASE_URL" in lines[0]


def test_unresolvable_host_gives_one_clear_line() -> None:
    result = manage("migrate", "--check", DATABASE_URL="postgresql://postgres@nosuchhost.invalid/x")

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobsite: cannot connect to Postgres at postgres@nosuchhost.invalid")


@pytest.mark.slow
def test_an_embedded_postgres_that_cannot_start_says_where_its_log_is(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    devdb.embedded_url(data_dir)
    devdb.stop(data_dir)
    (data_dir / "PG_VERSION").write_text("7\n")  # a data directory this server cannot run
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}

    result = subprocess.run(
        [sys.executable, "-m", "jobsite.devdb", "start"],
        cwd=ROOT,
        env=env | {"JOBSITE_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"jobsite: the embedded Postgres in {data_dir} did not start")
    assert f"its log is {data_dir / 'log'}" in last and "DATABASE_URL" in last
    assert "Traceback" not in result.stderr


def test_wrong_url_scheme_gives_one_clear_line() -> None:
    result = manage("check", DATABASE_URL="mysql://root:s3cret@localhost/app")

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "jobsite: configuration error: DATABASE_URL must be a postgresql:// URL, not "
        "'mysql://root:***@localhost/app'; for example "
        "postgresql://user:password@127.0.0.1:5432/dbname, or unset it to use the embedded "
        "Postgres."
    ]


def run_django_script(
    script: str, *, unset: tuple[str, ...] = (), timeout: float = 60, **extra: str
) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh Python with the project's settings: what a newcomer's terminal
    would show. PYTHONWARNINGS is dropped (pytest's own filters must not hide a warning)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", *unset)}
    env.update(DJANGO_SETTINGS_MODULE="jobsite.settings", **extra)
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_serving_a_first_page_prints_no_warning_about_static_files() -> None:
    """Before collectstatic, WhiteNoise warns of the missing STATIC_ROOT at the first
    request of every start; the finders serve the files meanwhile, so the site says
    nothing about it."""
    done = run_django_script(
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "print(Client().get('/login/').status_code)\n"
    )

    assert done.stdout.strip() == "200", done.stdout + done.stderr
    assert "No directory at" not in done.stderr


def test_starting_on_the_embedded_postgres_prints_nothing_about_it(tmp_path: Path) -> None:
    """daphne logs INFO: the embedded Postgres's own step-by-step INFO lines
    (PostmasterInfo(...)) and platformdirs' warning stay out of a newcomer's terminal."""
    done = run_django_script(
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('select 1')\n"
        "    print(cursor.fetchone()[0])\n"
        "from jobsite import devdb\n"
        "devdb.stop(devdb.DATA_DIR)\n",
        unset=("DATABASE_URL", "XDG_RUNTIME_DIR"),
        timeout=180,
        JOBSITE_DATA_DIR=str(tmp_path),
    )

    assert done.stdout.strip() == "1", done.stdout + done.stderr
    assert "PostmasterInfo" not in done.stderr
    assert "embedded_postgres" not in done.stderr
    assert "Warning" not in done.stderr, done.stderr
