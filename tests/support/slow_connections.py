"""A TCP proxy in front of the test database that makes every new connection wait a
while before it reaches Postgres: a real slow connection (a pooler under load, a far
server), for a worker that should behave the same whatever its connections cost."""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

from django.db import connection


class SlowConnections:
    """`with SlowConnections(delay) as proxy:` the test database, at `proxy.url`, where each
    connection's startup message is held back `delay` seconds. Plain text (no TLS or GSS
    encryption), so that the proxy sees where one message ends; after it, bytes pass as
    they come."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        s = connection.settings_dict
        return (
            f"postgresql://{s.get('USER') or ''}@127.0.0.1:{self.port}/{s['NAME']}"
            "?sslmode=disable&gssencmode=disable"
        )

    def __enter__(self) -> SlowConnections:
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop
        ).result(10)
        self.port = server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        s = connection.settings_dict
        host, port = s.get("HOST") or "127.0.0.1", int(s.get("PORT") or 5432)
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer = None
        try:
            length = await reader.readexactly(4)
            startup = length + await reader.readexactly(int.from_bytes(length, "big") - 4)
            await asyncio.sleep(self.delay)
            up_reader, up_writer = await self._upstream()
            up_writer.write(startup)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass  # one side went away: the other is closed below
        finally:
            for side in (writer, up_writer):
                if side is not None:
                    side.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while data := await source.read(65536):
        sink.write(data)
        await sink.drain()
    sink.close()
