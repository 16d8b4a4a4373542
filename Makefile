# jobsite: `make run` to try it, `make test` to check it. Everything installs itself.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml .python-version | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
SCENARIO ?=
PYTEST_ARGS ?=

.PHONY: run demo test check docs bench install browser pgbouncer db-start db-stop clean

install: $(STAMP)

$(STAMP): pyproject.toml .python-version
	@python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else "jobsite needs Python 3.13 or newer (see .python-version); python3 here is " + sys.version.split()[0])'
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# Chromium for the browser tests, from Debian (Playwright's own download does not work here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium from Debian"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# PgBouncer for the test that runs the console and the enqueue side through it, from Debian.
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || { \
		echo "installing pgbouncer from Debian"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq pgbouncer >/dev/null; }

# Starts the embedded Postgres unless DATABASE_URL points elsewhere.
db-start: install
	@if [ -z "$$DATABASE_URL" ]; then $(PY) -m jobsite.devdb start >/dev/null && echo "embedded Postgres running (data in .data/pg)"; fi

db-stop:
	@if [ -z "$$DATABASE_URL" ] && [ -x $(PY) ]; then $(PY) -m jobsite.devdb stop; fi

# The database and the demo `make run` sets up before it serves; `make run SETUP=` serves
# the database as it is (the tests do).
SETUP := demo

demo: install db-start
	$(PY) manage.py migrate --no-input
	$(PY) manage.py ensure_admin
	$(PY) manage.py load_demo

# daphne's line per HTTP request and websocket event only with JOBSITE_ACCESS_LOG=1 (and
# Django's WARNING per 4xx: jobsite/settings.py), so that the worker's lines stand out.
DAPHNE_ACCESS_LOG := $(if $(filter 1 true yes on,$(JOBSITE_ACCESS_LOG)),--access-log -,--access-log /dev/null)

# Ctrl-C: the worker gives running jobs 5 s (the demo's sales report runs 30 s) and the
# rest back to their queue; a second Ctrl-C aborts it at once. The terminal's SIGINT
# reaches neither daphne (a background command ignores it) nor the worker (in a session
# of its own): the recipe sends both one SIGTERM for each Ctrl-C, or the worker one when
# daphne stops by itself, and waits for both (a Ctrl-C cuts a `wait` short) before
# Postgres stops.
run: install db-start $(SETUP)
	@echo "console: http://$(HOST):$(PORT)/   (Ctrl-C stops the site, the worker and the embedded Postgres)"
	@setsid $(PY) manage.py runworker --concurrency 8 --shutdown-timeout 5 & worker=$$!; \
	$(VENV)/bin/daphne $(DAPHNE_ACCESS_LOG) -b $(HOST) -p $(PORT) jobsite.asgi:application & site=$$!; \
	trap 'kill $$worker $$site 2>/dev/null; stopped=1' INT TERM HUP; \
	wait $$site; status=$$?; \
	if [ -n "$$stopped" ]; then status=0; else kill $$worker 2>/dev/null; fi; \
	until wait; do :; done; \
	$(MAKE) --no-print-directory db-stop; \
	exit $$status

test: install browser pgbouncer db-start
	@status=0; $(PY) -m pytest $(PYTEST_ARGS) || status=$$?; \
	$(MAKE) --no-print-directory db-stop; \
	if [ $$status = 5 ]; then echo "pytest ran no test: failing"; fi; \
	exit $$status

check: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

# The manual, from docs/ and the docstrings, into site/; a warning (a broken link, a name
# the reference cannot find) fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

bench: install db-start
	$(PY) -m bench $(SCENARIO) $(if $(REPEATS),--repeats $(REPEATS)) \
		$(if $(DURATION),--duration $(DURATION)) $(if $(RATE),--rate $(RATE)) \
		$(if $(DEADLINE),--deadline $(DEADLINE))

clean:
	rm -rf $(VENV) .data bench/reports site
