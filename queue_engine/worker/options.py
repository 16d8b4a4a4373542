"""What `runworker` asks of one worker process."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkerOptions:
    conninfo: str
    queues: list[str] = field(default_factory=list)  # empty: every queue
    queue_weights: dict[str, int] | None = None  # --queues a:3,b:1 (worker/weights.py)
    concurrency: int = 10
    labels: list[str] = field(default_factory=list)
    worker_id: str = ""
    burst: bool = False
    poll_interval: float = 1.0
    shutdown_timeout: float = 30.0
    max_rescues: int = 5
    leader: bool = True  # take part in the leader election
    flow_release_chunk: int = 1000  # FLOW_RELEASE_CHUNK
