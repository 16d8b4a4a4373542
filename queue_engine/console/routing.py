from __future__ import annotations

from django.urls import path

from queue_engine.console.consumers import JobConsumer, OverviewConsumer, QueueConsumer

websocket_urlpatterns = [
    path("ws/overview/", OverviewConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/queues/<path:name>/", QueueConsumer.as_asgi()),
]
