"""Where the machine's CPU goes, second by second, while a load scenario runs.

A process of its own samples Linux's counters every SAMPLE seconds:
- `/proc/stat`: the whole machine's busy time, and the time the hypervisor took from
  this VM (steal), in cores (2.0 = both cores of this machine for the whole second);
- `/proc/<pid>/stat` of every process: the CPU time of Postgres's processes, of the
  `runworker` processes, of the bench process that started the sampler (the producer)
  and of the rest (the sampler's own process among them);
- `/proc/pressure/cpu` (PSI): the share of the second in which at least one runnable
  task waited for a CPU. Above a few percent, work queues behind other work, and a
  job's pickup waits for the scheduler as well as for the engine.

The samples are keyed by wall-clock time, the same clock as Postgres's `now()` on this
machine, so a scenario can put them beside its per-second series.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SAMPLE = 1.0  # seconds between samples
# How long stop() waits for the sampler to end, then for it to heed SIGTERM, then SIGKILL.
STOP_PATIENCE = 2.0
TICKS = os.sysconf("SC_CLK_TCK")
GROUPS = ("postgres", "workers", "producer", "other")
# The columns a sample adds to a per-second series.
COLUMNS = ("cpu_busy", "cpu_postgres", "cpu_workers", "cpu_producer", "cpu_steal", "cpu_wait_pct")


@dataclass
class Reading:
    at: float  # time.time()
    busy: float  # machine, seconds of CPU
    steal: float
    psi_some_us: int | None
    by_group: dict[str, float]


@dataclass
class CpuSampler:
    """Samples between start() and stop(), in a process of its own: reading every
    process's counters takes a couple of milliseconds, which in a thread of the bench
    would hold the producer's GIL once a second. `rows()` gives each interval's figures
    with the wall-clock time of its middle.

    The sampler appends each reading to a file as it takes it, and stops when a message
    (or the end of the bench) reaches its pipe: stop() never waits on the sampler for
    more than STOP_PATIENCE, and keeps the readings of a sampler that died. (A
    multiprocessing.Event would not do: its set() waits for every process asleep on it
    to wake, for ever if one died asleep.)"""

    readings: list[Reading] = field(default_factory=list)
    _process: Any = None
    _control: Any = None
    _path: Path | None = None

    def start(self) -> CpuSampler:
        context = multiprocessing.get_context("spawn")
        fd, name = tempfile.mkstemp(prefix="bench-cpu-", suffix=".jsonl")
        os.close(fd)
        self._path = Path(name)
        receive, self._control = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_sample, args=(name, receive, os.getpid()), name="cpu-sampler", daemon=True
        )
        self._process.start()
        receive.close()
        return self

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        with suppress(OSError):  # a dead sampler's end of the pipe is closed
            self._control.send("stop")
        self._control.close()
        process.join(STOP_PATIENCE)
        if process.is_alive():
            process.terminate()
            process.join(STOP_PATIENCE)
        if process.is_alive():
            process.kill()
            process.join(STOP_PATIENCE)
        self.readings = _load(self._path) if self._path is not None else []

    def rows(self) -> list[tuple[datetime, dict[str, float]]]:
        out = []
        for before, after in zip(self.readings, self.readings[1:], strict=False):
            span = after.at - before.at
            if span <= 0:
                continue
            figures = {
                "cpu_busy": (after.busy - before.busy) / span,
                "cpu_steal": (after.steal - before.steal) / span,
            }
            for group in GROUPS[:-1]:
                spent = after.by_group.get(group, 0.0) - before.by_group.get(group, 0.0)
                figures[f"cpu_{group}"] = max(spent, 0.0) / span
            if after.psi_some_us is not None and before.psi_some_us is not None:
                waited = (after.psi_some_us - before.psi_some_us) / 1e6
                figures["cpu_wait_pct"] = 100 * waited / span
            middle = datetime.fromtimestamp((before.at + after.at) / 2, UTC)
            out.append((middle, {k: round(v, 3) for k, v in figures.items()}))
        return out


def _sample(path: str, control: Any, producer: int) -> None:
    """The sampler process: a reading every SAMPLE seconds, each appended to `path` as a
    line of JSON, until a message or the end of the bench reaches `control`."""
    groups: dict[tuple[int, str], str] = {}
    with open(path, "a", encoding="utf-8") as out:
        while True:
            out.write(json.dumps(asdict(_read(groups, producer))) + "\n")
            out.flush()
            if control.poll(SAMPLE):  # a message, or EOF: the bench is gone
                return


def _load(path: Path) -> list[Reading]:
    """The readings a sampler wrote (a last line cut short by its death is left out)."""
    readings = []
    with suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                readings.append(Reading(**json.loads(line)))
            except (ValueError, TypeError):
                break
        path.unlink()
    return readings


def _read(groups: dict[tuple[int, str], str], producer: int) -> Reading:
    at = time.time()
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    busy = (user + nice + system + irq + softirq) / TICKS
    return Reading(at, busy, steal / TICKS, _psi_some(), _by_group(groups, producer))


def _by_group(groups: dict[tuple[int, str], str], producer: int) -> dict[str, float]:
    """CPU seconds so far of every live process, summed by group; `groups` remembers each
    process's group by (pid, start time), so a command line is read once."""
    spent = dict.fromkeys(GROUPS, 0.0)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        comm_end = stat.rfind(")")
        rest = stat[comm_end + 2 :].split()
        # Fields 14 and 15 (utime, stime) are rest[11] and rest[12]; 22 (start) rest[19].
        key = (pid, rest[19])
        group = groups.get(key)
        if group is None:
            group = groups[key] = _group(pid, stat[stat.find("(") + 1 : comm_end], producer)
        spent[group] += (int(rest[11]) + int(rest[12])) / TICKS
    return spent


def _group(pid: int, comm: str, producer: int) -> str:
    if pid == producer:
        return "producer"
    if comm.startswith("postgres") or comm.startswith("postmaster"):
        return "postgres"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    return "workers" if b"runworker" in cmdline else "other"


def _psi_some() -> int | None:
    try:
        line = Path("/proc/pressure/cpu").read_text().split("\n", 1)[0]
    except OSError:
        return None
    return int(line.rsplit("total=", 1)[1])
