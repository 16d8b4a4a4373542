from __future__ import annotations

from django.urls import path

from queue_engine.console import converters  # noqa: F401  the <queue:name> converter
from queue_engine.console.sockets import endpoint
from queue_engine.console.views import (
    audit,
    auth,
    dead,
    fleet,
    flows,
    job,
    jobs,
    kinds,
    metrics,
    overview,
    queue_config,
    queues,
    rerun,
    schedules,
    signals,
    workers,
)

app_name = "queue_engine"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("jobs/", jobs.jobs, name="jobs"),
    path("jobs/bulk/", jobs.bulk, name="bulk"),
    path("jobs/<int:job_id>/", job.job_detail, name="job"),
    path("jobs/<int:job_id>/signal/", signals.job_signal, name="job_signal"),
    path("jobs/<int:job_id>/wake/", signals.job_wake, name="job_wake"),
    path("jobs/<int:job_id>/reschedule/", signals.job_reschedule, name="job_reschedule"),
    path("flows/", flows.flows, name="flows"),
    path("flows/<int:flow_id>/", flows.flow_detail, name="flow"),
    path("flows/<int:flow_id>/action/", flows.flow_action, name="flow_action"),
    path("flows/<int:flow_id>/gate/", signals.flow_gate, name="flow_gate"),
    path("flows/<int:flow_id>/rerun/", rerun.rerun_from, name="flow_rerun_from"),
    path("dead/", dead.dead, name="dead"),
    path("dead/group/", dead.dead_group_action, name="dead_group"),
    path("schedules/", schedules.schedules, name="schedules"),
    path("schedules/action/", schedules.schedule_action, name="schedule_action"),
    path("workers/", workers.workers, name="workers"),
    path("kinds/", kinds.kinds, name="kinds"),
    path("kinds/action/", kinds.kind_action, name="kind_action"),
    path("audit/", audit.audit, name="audit"),
    path("metrics", metrics.metrics, name="metrics"),
    path("charts/", fleet.fleet, name="fleet"),
    path("queues/", queues.queues, name="queues"),
    # Queue names may hold any character, "/" included: the action routes come first.
    path("queues/<queue:name>/redrive/", queues.redrive, name="queue_redrive"),
    path("queues/<queue:name>/pause/", queues.pause, name="queue_pause"),
    path("queues/<queue:name>/resume/", queues.resume, name="queue_resume"),
    path("queues/<queue:name>/config/", queue_config.edit_config, name="queue_config"),
    path("queues/<queue:name>/config/reset/", queue_config.reset_config, name="queue_config_reset"),
    path("queues/<queue:name>/group-limit/", queue_config.group_limit, name="queue_group_limit"),
    path("queues/<queue:name>/", queues.queue, name="queue"),
    # Websockets (live updates); the placeholders answer 426 to a plain request.
    path("ws/overview/", endpoint("consumers.OverviewConsumer"), name="ws_overview"),
    path("ws/jobs/", endpoint("consumers.JobsConsumer"), name="ws_jobs"),
    path("ws/jobs/<int:job_id>/", endpoint("consumers.JobConsumer"), name="ws_job"),
    path("ws/flows/<int:flow_id>/", endpoint("consumers.FlowConsumer"), name="ws_flow"),
    path("ws/queues/<queue:name>/", endpoint("consumers.QueueConsumer"), name="ws_queue"),
    path("ws/pages/<slug:page>/", endpoint("live_pages.PageConsumer"), name="ws_page"),
]
