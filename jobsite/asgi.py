"""ASGI entry point for daphne: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobsite.settings")
# Under daphne many requests share a few connections: use psycopg's pool.
os.environ.setdefault("JOBSITE_DB_POOL", "1")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from queue_engine.console.asgi import console_websockets  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": console_websockets()})
