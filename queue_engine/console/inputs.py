"""What a console request brings is text Postgres can hold, or the request is refused.

Checked once for every console view (`access`), before the view reads anything:
the query string, the form and the parts of the address (a queue name). A NUL
reaching Postgres fails the statement it is in, and a lone surrogate cannot be
encoded to send; either would answer 500, or leave an action half done.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from django.http import HttpRequest

from queue_engine.payloads import has_nul, has_surrogate


def fields(request: HttpRequest, url_parts: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(what the text is, the text) for each name and value the request carries."""
    for name, value in url_parts.items():
        if isinstance(value, str):
            yield f"The {name} in the address", value
    for source in (request.GET, request.POST):
        for name, values in source.lists():
            yield "A field name", name
            for value in values:
                yield f"The field {name!r}", value


def postgres_can_hold(text: str) -> bool:
    return not (has_nul(text) or has_surrogate(text))


def unstorable(request: HttpRequest, url_parts: Mapping[str, Any]) -> str | None:
    """Why the first text of the request Postgres cannot hold is refused, or None."""
    for what, text in fields(request, url_parts):
        if has_nul(text):
            return (
                f"{what} has a NUL character (\\x00) in it, which Postgres cannot store: "
                "remove it and try again."
            )
        if has_surrogate(text):
            return (
                f"{what} has a lone surrogate character in it, which is not valid "
                "Unicode: remove it and try again."
            )
    return None
