"""DAG flows: `builder` makes and submits a graph of jobs, `runtime` is what a running node
may do to its own flow."""

from queue_engine.flows.builder import Flow, Node

__all__ = ["Flow", "Node"]
