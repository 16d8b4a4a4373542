from __future__ import annotations

from django.urls import path

from queue_engine.console import converters  # noqa: F401  the <queue:name> converter
from queue_engine.console.consumers import (
    FlowConsumer,
    JobConsumer,
    JobsConsumer,
    OverviewConsumer,
    QueueConsumer,
)
from queue_engine.console.live_pages import PageConsumer

websocket_urlpatterns = [
    path("ws/overview/", OverviewConsumer.as_asgi()),
    path("ws/jobs/", JobsConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/flows/<int:flow_id>/", FlowConsumer.as_asgi()),
    path("ws/queues/<queue:name>/", QueueConsumer.as_asgi()),
    path("ws/pages/<slug:page>/", PageConsumer.as_asgi()),
]
