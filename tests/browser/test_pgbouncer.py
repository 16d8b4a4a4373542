"""PgBouncer in transaction mode in front of the web process and the enqueue side.

DATABASE_URL points at a real pgbouncer (Debian's 1.18: no prepared statements in
transaction mode), DATABASE_DIRECT_URL at the database itself, as the README's
production section sets them up. Each transaction may run on another server connection,
so whatever leans on a session through DATABASE_URL (a prepared statement, LISTEN, a
session setting) fails here, or is seen to go wrong."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from queue_engine.models import JobRecord
from tests.support.browser import PASSWORD, Server, free_port, screenshot
from tests.support.workers import ROOT, Workers, database_url_for_tests, wait_for

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

pytestmark = pytest.mark.skipif(
    not os.path.exists(PGBOUNCER),
    reason="pgbouncer is missing: `make pgbouncer` installs it from Debian",
)

# Through the pooler, in one transaction: 30 jobs by enqueue, 20 by enqueue_many and one
# that fails; then a transaction that enqueues and rolls back; then a django.tasks task.
ENQUEUE = """
from django.db import transaction
from tests.support import jobs
pooled = jobs.noop.using(queue="pooled")
with transaction.atomic():
    for i in range(30):
        pooled.enqueue(n=i)
    pooled.enqueue_many([{"n": i} for i in range(20)])
    jobs.always_fails.using(queue="pooled").enqueue()
try:
    with transaction.atomic():
        pooled.enqueue(n=-1)
        raise RuntimeError("rolled back")
except RuntimeError:
    pass
jobs.task_total.enqueue([1, 2, 3], label="pooled")
print("enqueued")
"""


class Bouncer:
    """A pgbouncer in transaction mode in front of the test database's server."""

    def __init__(self) -> None:
        target = conninfo_to_dict(database_url_for_tests())
        self.user = str(target.get("user") or "postgres")
        # pgbouncer will not run as root: as root it becomes another user, who must read
        # its files and write its log, and reach the server: nobody over TCP, the owner
        # of the socket's directory over a Unix socket (the embedded Postgres keeps its
        # socket in its data directory, which only its owner may enter).
        host = str(target.get("host") or "127.0.0.1")
        self.run_as = (
            pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
        )
        self.dir = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        self.dir.chmod(0o777)
        self.port = free_port()
        server = " ".join(
            f"{key}={value}"
            for key, value in (
                ("host", host),
                ("port", target.get("port") or 5432),
                ("user", self.user),
                ("password", target.get("password")),
            )
            if value
        )
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        self.log = self.dir / "pgbouncer.log"
        self.ini = self.dir / "pgbouncer.ini"
        self.ini.write_text(
            f"""[databases]
* = {server}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "users.txt"}
pool_mode = transaction
default_pool_size = 3
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
logfile = {self.log}
pidfile = {self.dir / "pgbouncer.pid"}
log_connections = 1
"""
        )
        for path in self.dir.iterdir():
            path.chmod(0o666)
        command = [PGBOUNCER, str(self.ini)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", self.run_as]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=(self.dir / "stderr").open("wb")
        )
        wait_for(self.listening, timeout=10, message=f"pgbouncer on port {self.port}")
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/{target['dbname']}"

    def listening(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {self.output()}")
        try:
            psycopg.connect(
                f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres",
                connect_timeout=1,
            ).close()
        except psycopg.OperationalError:
            return False
        return True

    def output(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")
            for path in (self.dir / "stderr", self.log)
            if path.exists()
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def bouncer(transactional_db: None) -> Iterator[Bouncer]:
    pooler = Bouncer()
    yield pooler
    pooler.stop()


def test_the_console_and_the_enqueue_side_work_through_pgbouncer_in_transaction_mode(
    chromium: Any, bouncer: Bouncer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from django.contrib.auth.models import Group, User

    from queue_engine.console.roles import ensure_roles

    ensure_roles()
    pooled = {"DATABASE_URL": bouncer.url, "DATABASE_DIRECT_URL": database_url_for_tests()}
    site = Server(tmp_path, extra_env=pooled)
    workers = Workers(tmp_path, database_url=bouncer.url)
    try:
        user = User.objects.create_user("pooled-operator", password=PASSWORD)
        user.groups.add(Group.objects.get(name="operator"))
        page = chromium.new_page(viewport={"width": 1360, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(site.url + "/login/")
        page.fill("#id_username", "pooled-operator")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(site.url + "/")
        page.goto(site.url + "/jobs/?queue=pooled")
        page.wait_for_selector("[data-live].on")

        enqueued = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", ENQUEUE],
            cwd=ROOT,
            env=workers.env(**pooled),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert enqueued.returncode == 0, enqueued.stderr
        # The list follows through the listener, which connects past the pooler.
        page.wait_for_selector("#job-tabs a.s-available .tab-count:text-is('51')", timeout=8000)

        workers.start("--queues", "pooled,tasks", env=pooled)
        wait_for(
            lambda: JobRecord.objects.filter(queue__in=["pooled", "tasks"]).count() == 52,
            timeout=30,
            message="the 52 jobs enqueued through the pooler to end",
        )
        failed = JobRecord.objects.get(queue="pooled", state="failed")
        page.goto(f"{site.url}/jobs/?queue=pooled&state=failed")
        page.check("[data-select-all]")
        page.click("button[value=retry]")
        page.click("button[type=submit]:has-text('Retry 1 job')")
        flash = page.inner_text(".flash")
        wait_for(
            lambda: JobRecord.objects.filter(
                pk=failed.id, finished_at__gt=failed.finished_at
            ).exists(),
            timeout=30,
            message="the job retried from the console to run again",
        )
        page.goto(site.url + "/")
        screenshot(page, "through-pgbouncer")
        logs = site.output() + "".join(log.read_text(errors="replace") for log in workers.logs)
    finally:
        workers.stop_all()
        site.stop()
        if (report := getattr(request.node, "rep_call", None)) is not None and report.failed:
            print(bouncer.output(), site.output())

    assert "enqueued" in enqueued.stdout
    assert flash == "1 job retried."
    assert JobRecord.objects.filter(queue="pooled", kind="tests.noop").count() == 50
    assert not JobRecord.objects.filter(payload__n=-1).exists()
    assert JobRecord.objects.get(queue="tasks").result == {"label": "pooled", "total": 6}
    assert "Traceback" not in logs and "prepared statement" not in logs
    assert "login attempt" in bouncer.output()  # the clients did come through the pooler
    assert not errors
