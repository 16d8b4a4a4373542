"""A Django project of someone else's adopts the engine from its wheel, as the manual says.

The wheel is built from this checkout and installed into fresh virtualenvs outside it.
Each host is made with `django-admin startproject`, plus an app with a custom user model
and an app with a job; the engine comes in with the two INSTALLED_APPS entries and one
`include`, nothing of jobsite's. One host has Channels (live updates over websockets
under the console's prefix), the other has not (its pages poll).
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from queue_engine.connections import conninfo
from tests.support.doc_blocks import install_examples
from tests.support.workers import ROOT, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.once]

PREFIX = "/ops/jobs/"

ACCOUNTS_MODELS = """
from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    team = models.CharField(max_length=50, blank=True)
"""

SHOP_JOBS = """
from queue_engine import job


@job(queue="orders")
def ship(order: int) -> dict:
    return {"shipped": order}
"""

ENQUEUE = """
from django.db import transaction
from queue_engine.models import Job

with transaction.atomic():
    job = Job.objects.create(kind="shop.jobs.ship", payload={"order": 7})
print("JOB", job.pk)
"""

CHECK_DONE = """
from queue_engine.models import JobRecord

record = JobRecord.objects.get(pk={job_id})
print("STATE", record.state, record.result)
"""

ADMIN = """
from django.contrib.auth import get_user_model

get_user_model().objects.create_superuser("boss", "boss@example.com", "a-long-password-1")
"""


def manual_block(title: str) -> str:
    """The install page's block of that title: the host writes what the manual says."""
    (block,) = [b for b in install_examples() if b.title == title]
    return block.code


# The host's ASGI file: startproject's settings line, then the manual's block.
ASGI = (
    'import os\n\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")\n\n'
    + manual_block("asgi.py")
)
INCLUDE = 'path("ops/jobs/", include("queue_engine.console.urls"))'

# A websocket to the overview under the console's prefix, signed in as the superuser.
SOCKET = """
import asyncio

from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from host.asgi import application

client = Client()
client.force_login(get_user_model().objects.get(username="boss"))
cookie = f"sessionid={client.cookies['sessionid'].value}".encode()


async def main():
    socket = WebsocketCommunicator(
        application,
        "/ops/jobs/ws/overview/",
        headers=[(b"cookie", cookie), (b"origin", b"http://localhost"), (b"host", b"localhost")],
    )
    connected, _ = await socket.connect()
    html = await socket.receive_from(timeout=10)
    await socket.disconnect()
    print("SOCKET", connected, 'id="summary"' in html)


asyncio.run(main())
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Through an sdist, as a release is built: nothing is written into the checkout.
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    (built,) = out.glob("jobsite-*.whl")
    return built


@pytest.fixture
def host_database(db: None) -> Iterator[dict[str, str]]:
    """A database of the host's own on the test server, dropped afterwards."""
    name = f"host_{os.getpid()}_{os.urandom(3).hex()}"
    settings = connection.settings_dict
    params = {
        "NAME": name,
        "USER": settings.get("USER") or "",
        "PASSWORD": settings.get("PASSWORD") or "",
        "HOST": settings.get("HOST") or "",
        "PORT": str(settings.get("PORT") or ""),
    }
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield params
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def host_env() -> dict[str, str]:
    """This environment without jobsite's settings: the host has its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}


def run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=host_env(), capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def make_host(base: Path, wheel: Path, database: dict[str, str], *, live: bool) -> Path:
    """A virtualenv with the wheel, and a startproject project that adopts the engine."""
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    # A host with Channels runs an ASGI server too (daphne here, for its test client).
    wanted = [f"{wheel}[live]", "daphne"] if live else [str(wheel)]
    run([str(python), "-m", "pip", "install", "--quiet", *wanted, "psycopg[binary]"], cwd=base)
    run([str(venv / "bin" / "django-admin"), "startproject", "host", str(base)], cwd=base)
    for app, files in {
        "accounts": {"models.py": ACCOUNTS_MODELS},
        "shop": {"jobs.py": SHOP_JOBS},
    }.items():
        run([str(python), "manage.py", "startapp", app], cwd=base)
        for name, text in files.items():
            (base / app / name).write_text(textwrap.dedent(text))
    settings = base / "host" / "settings.py"
    text = settings.read_text()
    text = text.replace(
        "INSTALLED_APPS = [",
        'INSTALLED_APPS = [\n    "django.contrib.postgres",\n    "queue_engine",\n'
        '    "accounts",\n    "shop",',
    )
    text = re.sub(
        r"DATABASES = \{.*?\n\}\n",
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.postgresql', "
        + ", ".join(f"{k!r}: {v!r}" for k, v in database.items())
        + "}}\n",
        text,
        flags=re.S,
    )
    text += '\nAUTH_USER_MODEL = "accounts.User"\nALLOWED_HOSTS = ["localhost", "127.0.0.1"]\n'
    settings.write_text(text)
    urls = base / "host" / "urls.py"
    assert INCLUDE in manual_block("urls.py")
    urls.write_text(
        urls.read_text()
        .replace("from django.urls import path", "from django.urls import include, path")
        .replace("urlpatterns = [", f"urlpatterns = [\n    {INCLUDE},")
    )
    if live:
        (base / "host" / "asgi.py").write_text(ASGI)
    manage = [str(python), "manage.py"]
    run([*manage, "makemigrations", "accounts"], cwd=base)
    run([*manage, "migrate", "--no-input"], cwd=base)
    run([*manage, "shell", "-c", ADMIN], cwd=base)
    return python


class Browser:
    """A person at the host's site: cookies, the console's sign-in form, GETs."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with self.opener.open(self.root + path, timeout=30) as response:
                return response.status, response.geturl(), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.geturl(), error.read().decode()

    def sign_in(self) -> None:
        status, url, page = self.get(PREFIX + "jobs/")
        assert status == 200 and "/ops/jobs/login/" in url, (status, url)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token is not None
        form = urllib.parse.urlencode(
            {
                "csrfmiddlewaretoken": token.group(1),
                "username": "boss",
                "password": "a-long-password-1",
                "next": PREFIX + "jobs/",
            }
        ).encode()
        request = urllib.request.Request(url, data=form, headers={"Referer": url})
        with self.opener.open(request, timeout=30) as response:
            assert response.geturl().endswith(PREFIX + "jobs/"), response.geturl()


def serve(python: Path, base: Path) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(python), "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=base,
        env=host_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            return False

    wait_for(up, timeout=30, message="the host's runserver")
    return server, f"http://127.0.0.1:{port}"


def adopt_and_use(tmp_path: Path, wheel: Path, database: dict[str, str], *, live: bool) -> str:
    base = tmp_path / "host"
    base.mkdir()
    python = make_host(base, wheel, database, live=live)
    manage = [str(python), "manage.py"]

    job_id = int(run([*manage, "shell", "-c", ENQUEUE], cwd=base).split()[-1])
    run([*manage, "runworker", "--burst"], cwd=base)
    done = run([*manage, "shell", "-c", CHECK_DONE.format(job_id=job_id)], cwd=base)
    assert "STATE succeeded {'shipped': 7}" in done, done

    server, root = serve(python, base)
    try:
        browser = Browser(root)
        browser.sign_in()
        status, _, jobs_page = browser.get(PREFIX + "jobs/")
        assert status == 200 and f'href="{PREFIX}jobs/{job_id}/"' in jobs_page
        status, _, job_page = browser.get(f"{PREFIX}jobs/{job_id}/")
        assert status == 200 and "shop.jobs.ship" in job_page
        assert f'href="{PREFIX}queues/orders/"' in job_page
        status, _, css = browser.get("/static/queue_engine/console.css")
        assert status == 200 and "--running" in css
        pages = ("", "queues/", "flows/", "dead/", "schedules/", "kinds/", "workers/", "audit/")
        for page in pages:
            status, _, _ = browser.get(PREFIX + page)
            assert status == 200, (page, status)
        return jobs_page
    finally:
        server.terminate()
        server.wait(10)


def test_a_host_with_channels_adopts_the_engine_from_its_wheel(
    tmp_path: Path, wheel: Path, host_database: dict[str, str]
) -> None:
    jobs_page = adopt_and_use(tmp_path, wheel, host_database, live=True)

    # runserver serves no websocket: the pages poll, and say so.
    assert "data-poll" in jobs_page
    socket = run(
        [str(tmp_path / "host" / "venv" / "bin" / "python"), "manage.py", "shell", "-c", SOCKET],
        cwd=tmp_path / "host",
    )
    assert "SOCKET True True" in socket, socket


def test_a_host_without_channels_gets_every_page(
    tmp_path: Path, wheel: Path, host_database: dict[str, str]
) -> None:
    jobs_page = adopt_and_use(tmp_path, wheel, host_database, live=False)

    assert "data-poll" in jobs_page and "ws-connect" not in jobs_page
    listed = run(
        [str(tmp_path / "host" / "venv" / "bin" / "python"), "-m", "pip", "list"],
        cwd=tmp_path,
    )
    assert "channels" not in listed.lower()
