"""What a flow's timeline reads beside its graph: when each node's failed attempts ended."""

from __future__ import annotations

# Each node's failures, as (attempt, at) pairs from its errors, live and ended nodes alike;
# nodes with no failure are left out.
FLOW_NODE_FAILURES = """
SELECT id, (SELECT array_agg(ARRAY[e->>'attempt', e->>'at'] ORDER BY ord)
              FROM jsonb_array_elements(errors) WITH ORDINALITY AS x(e, ord))
  FROM (SELECT id, errors FROM queue_engine_job
         WHERE flow_id = %(flow)s AND id <= %(upto)s AND errors <> '[]'::jsonb
        UNION ALL
        SELECT id, errors FROM queue_engine_jobrecord
         WHERE flow_id = %(flow)s AND id <= %(upto)s AND errors <> '[]'::jsonb) nodes
"""
