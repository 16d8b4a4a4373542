"""A queue name as one URL path segment.

Queue names may hold any character, '/' included, so `queues/<path:name>/` could not
tell the page of a queue named "emails/config" from the configuration of "emails".
In URLs a name is written with '/' as "~s" and '~' as "~~"; everything else is left
to Django's percent-encoding.
"""

from __future__ import annotations

import re

from django.urls import register_converter

_ESCAPE = re.compile(r"~(.)")
_UNESCAPE = {"~": "~", "s": "/"}


class QueueNameConverter:
    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        def unescape(match: re.Match[str]) -> str:
            try:
                return _UNESCAPE[match.group(1)]
            except KeyError:
                raise ValueError(f"not a queue name in a URL: {value!r}") from None

        if value.endswith("~") and not value.endswith("~~"):
            raise ValueError(f"not a queue name in a URL: {value!r}")
        return _ESCAPE.sub(unescape, value)

    def to_url(self, value: str) -> str:
        return value.replace("~", "~~").replace("/", "~s")


# Registered once, on import: console/urls.py and console/routing.py both import it.
register_converter(QueueNameConverter, "queue")
