"""Live updates for a host's ASGI application: the console's websocket routes.

```python
application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": console_websockets()}
)
```

Needs Channels (`pip install jobsite[live]`). A host that serves websockets of its own
passes its app as `inner`: paths that are not the console's go there untouched.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

from queue_engine.console import sockets

Scope = dict[str, Any]
App = Any


class ConsoleSockets:
    """Routes a websocket to the console's consumer whose route its path resolves to in
    the host's URLconf, under whatever prefix the console is mounted at."""

    def __init__(self, inner: App | None) -> None:
        self.inner = inner
        self.apps: dict[str, App] = {}

    def app(self, consumer: str) -> App:
        if consumer not in self.apps:
            # Login is checked by the consumers (they close a signed-out socket with a
            # code the page understands); pages of other sites may not open one.
            self.apps[consumer] = AllowedHostsOriginValidator(
                AuthMiddlewareStack(import_string(consumer).as_asgi())
            )
        return self.apps[consumer]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path: str = scope.get("path_info") or scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        try:
            match = resolve(path)
        except Resolver404:
            match = None
        consumer = getattr(match.func, "socket_consumer", None) if match else None
        if match is None or consumer is None:
            if self.inner is not None:
                await self.inner(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 4404})
            return
        route = {"args": match.args, "kwargs": match.kwargs}
        await self.app(consumer)({**scope, "url_route": route}, receive, send)


def console_websockets(inner: App | None = None) -> App:
    """The console's websocket routes as an ASGI app for `ProtocolTypeRouter`'s
    "websocket" key; pages of this process then connect a socket instead of polling."""
    sockets.served = True
    return ConsoleSockets(inner)
