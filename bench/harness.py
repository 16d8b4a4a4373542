"""The benchmark harness: a fresh database, the scenarios, their results and the report.

Setup: create the database `jobsite_bench` (JOBSITE_BENCH_DB overrides the name) on
the server Django's settings point to (DATABASE_URL, else the embedded Postgres),
point Django at it, migrate, and install the hand-written baseline's table.

A scenario is a module under bench/scenarios/ with `NAME` and `run(env) -> list[dict]`;
it times its own work and the baseline's through `env.compare(...)` and turns the
samples into result rows with `env.result(...)`. The harness prints each row as one
JSON line on stdout and writes an HTML report to bench/reports/.

Every scenario has a deadline (`--deadline`, else the module's `deadline(env)`, else
bench.deadline.DEADLINE): past it, the scenario stops its workers and the harness
reports the rows it kept (`env.keep`) and a row saying it was overdue, all marked
`"partial": true`. A bench run never hangs.
"""

from __future__ import annotations

import html
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import baseline
from bench.charts import series_section, soak_section
from bench.deadline import DEADLINE, GRACE, Overdue
from bench.deadline import deadline as deadline_of

BENCH_DB = os.environ.get("JOBSITE_BENCH_DB", "jobsite_bench")
REPEATS = 3
REPORT_DIR = Path(__file__).resolve().parent / "reports"
JOB_TABLES = (
    "queue_engine_job",
    "queue_engine_jobrecord",
    "queue_engine_joblog",
    "queue_engine_jobstep",
)

# One timed run: given the repetition index, do the work once and return seconds.
Timed = Callable[[int], float]
Result = dict[str, Any]


@dataclass
class BenchEnv:
    """What a scenario gets: the benchmark database, the run's settings and helpers."""

    conninfo: str
    settings: dict[str, Any]
    repeats: int = REPEATS
    # A load scenario's run length (seconds) and producer rate (jobs/s); None: its own.
    duration: float | None = None
    rate: float | None = None
    can_checkpoint: bool = True
    extra_tables: list[str] = field(default_factory=list)
    # Seconds every scenario may run (--deadline); None: each its own.
    deadline: float | None = None
    # Rows the running scenario finished: reported even if it is overdue.
    kept: list[Result] = field(default_factory=list)

    def keep(self, row: Result) -> Result:
        """A finished row of the running scenario, reported even if it ends overdue."""
        self.kept.append(row)
        return row

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A raw psycopg connection to the benchmark database."""
        return psycopg.connect(self.conninfo, autocommit=autocommit)

    def truncate(self) -> None:
        """Empty the job tables and the baseline's, then checkpoint (when allowed)."""
        tables = [*JOB_TABLES, *self.extra_tables, baseline.TABLE]
        statement = sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in tables)
        )
        with self.connect() as conn:
            conn.execute(statement)
            self._checkpoint(conn)

    def _checkpoint(self, conn: psycopg.Connection[Any]) -> None:
        # Starts every timed run with no dirty buffers from the previous one.
        if not self.can_checkpoint:
            return
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            self.can_checkpoint = False
            self.settings["checkpoint_between_runs"] = False

    def compare(self, ours: Timed, theirs: Timed) -> tuple[list[float], list[float]]:
        """Time ours and the baseline `repeats` times each, alternating which goes first.

        The job tables are truncated before every run. Returns the seconds of each run.
        """
        ours_seconds: list[float] = []
        base_seconds: list[float] = []
        for rep in range(self.repeats):
            runs = [(ours, ours_seconds), (theirs, base_seconds)]
            if rep % 2:
                runs.reverse()
            for timed, sink in runs:
                self.truncate()
                sink.append(timed(rep))
        self.truncate()
        return ours_seconds, base_seconds

    def result(
        self,
        scenario: str,
        *,
        unit: str,
        samples: Sequence[float],
        baseline_samples: Sequence[float],
        target: str,
        target_value: float | None = None,
        n: int,
        higher_is_better: bool | None = None,
        target_ratio: float | None = None,
        **details: Any,
    ) -> Result:
        """One result row: medians, the ratio to the baseline, the target and the settings.
        A target given as `target_ratio` is that share of the baseline's median; a scenario
        with no baseline passes no baseline samples."""
        value = statistics.median(samples)
        base = statistics.median(baseline_samples) if baseline_samples else None
        if target_ratio is not None and base is not None:
            target_value = target_ratio * base
        higher = unit != "ms" if higher_is_better is None else higher_is_better
        met = None
        if target_value is not None:
            met = value >= target_value if higher else value <= target_value
        return {
            "scenario": scenario,
            "value": _round(value, unit),
            "unit": unit,
            "baseline": None if base is None else _round(base, unit),
            "ratio": round(value / base, 3) if base else None,
            "target": target,
            "target_value": None if target_value is None else _round(target_value, unit),
            "target_met": met,
            "samples": [_round(s, unit) for s in samples],
            "baseline_samples": [_round(s, unit) for s in baseline_samples],
            **details,
            "settings": {
                "n": n,
                "repeats": self.repeats,
                **self.settings,
                "loadavg_1m": round(os.getloadavg()[0], 2),  # other work skews the figures
            },
        }


def per_second(n: int, seconds: Sequence[float]) -> list[float]:
    """Throughput of each run that did `n` jobs."""
    return [n / s for s in seconds]


def timer() -> Callable[[], float]:
    """Start a clock; calling the result gives the seconds since."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def _round(value: float, unit: str) -> float:
    return round(value, 3 if unit == "ms" else 1)


# --- setup -----------------------------------------------------------------------------


def setup(
    repeats: int = REPEATS, duration: float | None = None, rate: float | None = None
) -> BenchEnv:
    """Point Django at a fresh benchmark database, migrate it, install the baseline."""
    server = configure_django(BENCH_DB)
    from queue_engine.connections import conninfo

    log(f"creating database {BENCH_DB!r} on {server}")
    recreate_database(conninfo(dbname="postgres"), BENCH_DB)
    migrate()
    info = conninfo()
    with psycopg.connect(info, autocommit=True) as conn:
        baseline.install(conn)
        settings = run_settings(conn, server)
    warn_if_busy()
    return BenchEnv(conninfo=info, settings=settings, repeats=repeats, duration=duration, rate=rate)


def warn_if_busy() -> None:
    load = os.getloadavg()[0]
    if load >= 1.0:
        log(
            f"warning: load average {load:.1f} before the first run; other work on this "
            "machine (or its Postgres) will skew the figures"
        )


def configure_django(dbname: str) -> str:
    """Load the settings (starting the embedded Postgres if needed), swap the database name,
    then set Django up. Returns a description of the server."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobsite.settings")
    import django
    from django.conf import settings

    from jobsite.database import describe

    database = settings.DATABASES["default"]
    database["NAME"] = dbname
    settings.DEBUG = False  # no query log in the timed loops
    engine = dict(getattr(settings, "QUEUE_ENGINE", {}) or {})
    engine["JOB_MODULES"] = [*engine.get("JOB_MODULES", []), "bench.jobs"]
    settings.QUEUE_ENGINE = engine
    django.setup()
    source = database.get("SOURCE", "DATABASES")
    return f"{source} ({describe({**database, 'NAME': None}).removesuffix('/None')})"


def recreate_database(admin_conninfo: str, dbname: str) -> None:
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def migrate() -> None:
    from django.core.management import call_command

    started = timer()
    call_command("migrate", interactive=False, verbosity=0)
    log(f"migrated in {started():.1f} s")


def run_settings(conn: psycopg.Connection[Any], server: str) -> dict[str, Any]:
    """What the results depend on, recorded with every result row."""
    import django
    from django.conf import settings

    def show(name: str) -> str:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
        return str(row[0]) if row else "?"

    return {
        "python": platform.python_version(),
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "postgres": show("server_version").split()[0],
        "server": server,
        "database": BENCH_DB,
        "fsync": show("fsync"),
        "synchronous_commit": show("synchronous_commit"),
        "django_pool": "pool" in settings.DATABASES["default"].get("OPTIONS", {}),
        "cpus": os.cpu_count(),
        "host": platform.node(),
        "git": git_revision(),
        "checkpoint_between_runs": True,
    }


def git_revision() -> str:
    """The commit measured, and whether the working tree differed from it."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit} (with uncommitted changes)" if dirty else commit


# --- running ---------------------------------------------------------------------------


def run(
    names: Sequence[str],
    repeats: int = REPEATS,
    duration: float | None = None,
    rate: float | None = None,
    deadline: float | None = None,
) -> int:
    """Run the named scenarios; print results, write the report. Returns the exit status."""
    from bench.scenarios import load

    started_at = datetime.now(UTC)
    env = setup(repeats, duration, rate)
    env.deadline = deadline
    results: list[Result] = []
    failed = 0
    for name in names:
        module = load(name)
        own = getattr(module, "deadline", None)
        # A scenario with no deadline of its own gets longer for a longer --duration.
        default = DEADLINE + 2 * env.repeats * (env.duration or 0.0)
        rows = run_scenario(name, module.run, env, deadline=own(env) if own else default)
        failed += any("error" in row for row in rows)
        results.extend(rows)
    path = write_report(results, {**env.settings, "repeats": env.repeats}, started_at)
    log(f"report: {path}")
    close_django()
    return 1 if failed else 0


def run_scenario(
    name: str,
    scenario: Callable[[BenchEnv], list[Result]],
    env: BenchEnv,
    *,
    deadline: float = DEADLINE,
    grace: float = GRACE,
) -> list[Result]:
    """Run one scenario, for at most `deadline` seconds (env.deadline, if set, instead),
    and `grace` more to stop its workers; print its rows and return them."""
    seconds = env.deadline or deadline
    log(f"running {name} (deadline {seconds:g} s) ...")
    started = timer()
    env.kept = []

    def overdue(why: str) -> list[Result]:
        log(f"{name} {why} after {started():.1f} s: reporting what it has")
        error = {"scenario": name, "error": f"overdue: {why}", "partial": True}
        return [*({**row, "partial": True} for row in env.kept), error]

    def hung() -> None:
        for row in overdue(f"did not stop within {grace:g} s of its deadline ({seconds:g} s)"):
            print(json.dumps(row), flush=True)

    try:
        with deadline_of(seconds, last_resort=hung, grace=grace):
            rows = scenario(env)
    except Overdue:
        rows = overdue(f"stopped at its deadline of {seconds:g} s")
    except Exception as exc:
        traceback.print_exc()
        rows = [{"scenario": name, "error": f"{type(exc).__name__}: {exc}"}]
    for row in rows:
        print(json.dumps(row), flush=True)
    log(f"{name} took {started():.1f} s")
    return rows


def close_django() -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# --- the HTML report -------------------------------------------------------------------

COLUMNS = (
    "scenario",
    "value",
    "unit",
    "baseline",
    "ratio",
    "target",
    "target_met",
    "samples",
    "baseline_samples",
    "n",
)

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.met { background: #e6f4e6; } .missed { background: #fbe7e7; } .error { color: #a00; }
"""


def write_report(results: Sequence[Result], settings: dict[str, Any], started_at: datetime) -> Path:
    """Write report-<timestamp>.html and latest.html under bench/reports/; return the first."""
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    path = REPORT_DIR / f"report-{started_at:%Y%m%d-%H%M%S}.html"
    path.write_text(render_report(results, settings, started_at), encoding="utf-8")
    shutil.copyfile(path, REPORT_DIR / "latest.html")
    return path


def render_report(results: Sequence[Result], settings: dict[str, Any], started_at: datetime) -> str:
    title = f"jobsite benchmarks, {started_at:%Y-%m-%d %H:%M:%S} UTC"
    head = "".join(f"<th>{_e(c)}</th>" for c in COLUMNS)
    rows = "\n".join(_result_row(r) for r in results)
    details = "\n".join(_details_row(r) for r in results if "error" not in r)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{_e(title)}</h1>
<p>Values are medians of {_e(settings.get("repeats", REPEATS))} runs; ratio = value / baseline,
the baseline being a hand-written psycopg 3 version of the same work run alternately with ours.</p>
<table><thead><tr>{head}</tr></thead><tbody>
{rows}
</tbody></table>
<h2>Methods</h2>
<table><thead><tr><th>scenario</th><th>ours</th><th>baseline</th></tr></thead><tbody>
{details}
</tbody></table>
{series_section(results)}
{soak_section(results)}
<h2>Settings</h2>
<table><tbody>
{_settings_rows(settings)}
</tbody></table>
</body></html>
"""


def _result_row(result: Result) -> str:
    if "error" in result:
        return (
            f"<tr><td>{_e(result['scenario'])}</td>"
            f'<td class="error" colspan="{len(COLUMNS) - 1}">{_e(result["error"])}</td></tr>'
        )
    met = result.get("target_met")
    css = "met" if met is True else "missed" if met is False else ""
    cells = []
    for column in COLUMNS:
        value = result["settings"]["n"] if column == "n" else result.get(column)
        if column == "scenario" and result.get("partial"):
            value = f"{value} (partial: the scenario was overdue)"
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        cells.append(f'<td class="{"num" if numeric else ""}">{_e(_text(value))}</td>')
    return f'<tr class="{css}">{"".join(cells)}</tr>'


def _details_row(result: Result) -> str:
    return (
        f"<tr><td>{_e(result['scenario'])}</td><td>{_e(result.get('method', ''))}</td>"
        f"<td>{_e(result.get('baseline_method', ''))}</td></tr>"
    )


def _settings_rows(settings: dict[str, Any]) -> str:
    return "\n".join(
        f"<tr><th>{_e(k)}</th><td>{_e(_text(v))}</td></tr>" for k, v in settings.items()
    )


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
