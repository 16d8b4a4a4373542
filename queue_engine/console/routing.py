from __future__ import annotations

from django.urls import path

from queue_engine.console.consumers import (
    FlowConsumer,
    JobConsumer,
    JobsConsumer,
    OverviewConsumer,
    QueueConsumer,
)

websocket_urlpatterns = [
    path("ws/overview/", OverviewConsumer.as_asgi()),
    path("ws/jobs/", JobsConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/flows/<int:flow_id>/", FlowConsumer.as_asgi()),
    path("ws/queues/<path:name>/", QueueConsumer.as_asgi()),
]
