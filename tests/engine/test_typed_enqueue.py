"""A type checker holds `enqueue`, a root node's `Flow.add` and `ctx.step` to the
handler's (or the step function's) parameters, without its ctx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """\
from queue_engine import Flow, JobContext, job


@job(queue="emails")
def send_welcome(ctx: JobContext, user_id: int, *, template: str = "welcome") -> None: ...


@job
def add(a: int, b: int) -> int:
    return a + b


@job
async def fetch(ctx: JobContext, url: str) -> str:
    return url


send_welcome.enqueue(7)
send_welcome.enqueue(user_id=7, template="x")
send_welcome.using(priority=5).enqueue(7)
send_welcome.enqueue_debounced(7)
add.enqueue(1, 2)
fetch.using(queue="pages").enqueue("https://example.com")

send_welcome.enqueue(7, too="x")  # refused: Unexpected keyword argument "too"
send_welcome.enqueue("seven")  # refused: incompatible type "str"; expected "int"
add.enqueue(1)  # refused: Missing positional argument "b"
fetch.using(queue="pages").enqueue(url=3)  # refused: incompatible type "int"; expected "str"
send_welcome.enqueue_debounced()  # refused: Missing positional argument "user_id"

flow = Flow("sample")
flow.add("root", add, 1, 2)
flow.add("welcome", send_welcome, user_id=7)
flow.add("by-name", "billing.charge", amount=3)
flow.add("child", add, 1, 2, depends_on=["root"])
flow.add("bad", add, 1, "two")  # refused: No overload variant of "add" of "Flow" matches
flow.add("typo", send_welcome, user=7)  # refused: No overload variant of "add" of "Flow"


def double(n: int) -> int:
    return n * 2


@job
def stepper(ctx: JobContext) -> int:
    twice: int = ctx.step("double", double, 2)
    ctx.step("wrong", double, "two")  # refused: Argument 3 to "step" of "JobContext"
    return twice
"""
# line number -> what mypy must say there; every other line must pass
REFUSED = {
    number: line.split("# refused: ")[1]
    for number, line in enumerate(SAMPLE.splitlines(), start=1)
    if "# refused: " in line
}


@pytest.mark.slow
def test_mypy_refuses_wrong_arguments_and_accepts_right_ones(tmp_path: Path) -> None:
    sample = tmp_path / "sample_jobs.py"
    sample.write_text(SAMPLE)

    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(sample)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )

    errors = {
        int(line.split(":")[1]): line.split("error: ")[1]
        for line in done.stdout.splitlines()
        if ": error: " in line
    }
    assert sorted(errors) == sorted(REFUSED), done.stdout
    for number, expected in REFUSED.items():
        assert expected in errors[number], (number, errors[number])
