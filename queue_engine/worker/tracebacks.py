"""A failed attempt's traceback as text: what the job page shows under each error."""

from __future__ import annotations

import linecache
import traceback


def format_trace(exc: BaseException) -> str:
    """The exception's traceback as Python prints it, chained exceptions included, with
    each frame's file, line and source line, but without the `~~~^^^` markers under the
    lines and the folding of repeated lines: the standard formatter finds the markers by
    parsing every line's source again, and a failed attempt would spend most of its time
    there. Exception groups, rare, get the standard formatter."""
    return "".join(_trace_lines(exc, set()))


def _trace_lines(exc: BaseException, seen: set[int]) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return traceback.format_exception(exc)
    seen.add(id(exc))
    lines: list[str] = []
    cause, context = exc.__cause__, exc.__context__
    if cause is not None and id(cause) not in seen:
        lines += _trace_lines(cause, seen)
        lines.append("\nThe above exception was the direct cause of the following exception:\n\n")
    elif context is not None and not exc.__suppress_context__ and id(context) not in seen:
        lines += _trace_lines(context, seen)
        lines.append("\nDuring handling of the above exception, another exception occurred:\n\n")
    if exc.__traceback__ is not None:
        lines.append("Traceback (most recent call last):\n")
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            code = frame.f_code
            lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
            source = linecache.getline(code.co_filename, lineno or 0, frame.f_globals).strip()
            if source:
                lines.append(f"    {source}\n")
    if isinstance(exc, SyntaxError):
        lines += traceback.format_exception_only(exc)  # the caret under the bad code
        return lines
    # As format_exception_only() writes it, which would first format the whole chain.
    name = type(exc).__qualname__
    module = type(exc).__module__
    if module not in ("__main__", "builtins"):
        name = f"{module}.{name}"
    text = safe_str(exc)
    lines.append(f"{name}: {text}\n" if text else f"{name}\n")
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list | tuple):
        lines += [f"{safe_str(note)}\n" for note in notes]
    return lines


def safe_str(value: object) -> str:
    """str(value) (an exception, a note), or a note when its own __str__ fails."""
    try:
        return str(value)
    except Exception as inner:
        return f"<str() of the exception failed: {type(inner).__name__}>"
