"""The console's websocket addresses, declared in its URLconf like its pages.

Each live page's socket has a route in `console/urls.py` whose view is a placeholder
carrying the consumer's dotted path: `{% url %}` builds the socket's address under
whatever prefix the host mounted the console at, and `console_websockets()`
(`queue_engine.console.asgi`) resolves an incoming websocket's path against the same
URLconf to find its consumer. This module imports nothing of Channels, so the console's
URLs load in a host without it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse

from queue_engine.conf import option

CONSUMERS = "queue_engine.console"

# Whether this process serves the console's websockets: `console_websockets()` sets it.
served = False


def endpoint(consumer: str) -> Any:
    """The placeholder view of a websocket route; `consumer` is a dotted path under
    `queue_engine.console`."""

    @login_not_required  # nothing to protect: it says where the socket is, no more
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return HttpResponse(
            "This address serves the console's live updates over a websocket.\n",
            status=426,
            content_type="text/plain; charset=utf-8",
            headers={"Upgrade": "websocket"},
        )

    view.socket_consumer = f"{CONSUMERS}.{consumer}"  # type: ignore[attr-defined]
    return view


def websockets_on() -> bool:
    """Whether pages connect a websocket for live updates (else they poll)."""
    mode = option("LIVE_UPDATES")
    if mode == "auto":
        return served
    return bool(mode == "websocket")
