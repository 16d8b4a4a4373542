"""The traceback a failed attempt records: what Python prints, without the markers."""

import traceback

from queue_engine.exceptions import Fatal
from queue_engine.worker.tracebacks import format_trace


def lookup(data: dict[str, int]) -> int:
    return data["missing"] + 1


def caught(func, *args):  # type: ignore[no-untyped-def]
    try:
        func(*args)
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def wrapped() -> None:
    try:
        lookup({})
    except KeyError as exc:
        raise Fatal("could not look it up") from exc


def handled() -> None:
    try:
        lookup({})
    except KeyError:
        raise ValueError("while handling") from None


def during() -> None:
    try:
        lookup({})
    except KeyError:
        raise ValueError("while handling")  # noqa: B904


def test_a_trace_has_each_frame_with_its_source_line_and_the_exception() -> None:
    exc = caught(lookup, {})
    trace = format_trace(exc)
    assert trace.startswith("Traceback (most recent call last):\n")
    assert f'File "{__file__}", line' in trace and ", in lookup\n" in trace
    assert '    return data["missing"] + 1\n' in trace
    assert trace.endswith("KeyError: 'missing'\n")
    assert "^" not in trace
    # The same frames and lines as Python's own, markers aside.
    standard = "".join(traceback.format_exception(exc))
    assert [line for line in standard.splitlines() if "^" not in line] == trace.splitlines()


def test_chained_exceptions_come_first_as_python_prints_them() -> None:
    trace = format_trace(caught(wrapped))
    first, second = trace.split(
        "\nThe above exception was the direct cause of the following exception:\n\n"
    )
    assert "KeyError: 'missing'" in first
    assert second.endswith("queue_engine.exceptions.Fatal: could not look it up\n")

    trace = format_trace(caught(during))
    assert "During handling of the above exception, another exception occurred:" in trace
    assert "KeyError" not in format_trace(caught(handled))  # from None hides the context


def test_notes_follow_and_a_failing_str_does_not_lose_the_trace() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    exc = Unprintable()
    exc.add_note("checked the cache first")
    trace = format_trace(exc)
    assert "Unprintable: <str() of the exception failed: RuntimeError>\n" in trace
    assert trace.endswith("checked the cache first\n")


def test_exception_groups_and_syntax_errors_get_the_standard_formatter() -> None:
    group = ExceptionGroup("two", [ValueError("a"), KeyError("b")])
    assert format_trace(group) == "".join(traceback.format_exception(group))
    error = caught(compile, "x = (", "job.py", "exec")
    assert "SyntaxError: '(' was never closed" in format_trace(error)
    assert 'File "job.py", line 1' in format_trace(error)
