"""The claim: the statement that hands a worker its next jobs, under every limit."""

from queue_engine.sql import shares
from queue_engine.sql.fragments import CLAIM_CONFIGS, OUTPUTS

# For the rest of the claim's transaction (the claim comes last), on top of the lane
# connection's own settings (LANE_SETTINGS below: one generic plan, no
# sequential scans): no bitmap scans. With statistics taken while a queue held few
# available jobs (a fan-out's children still blocked, say) the planner reads the whole
# claim index into a bitmap and sorts it, every claim, instead of walking it in order
# to the LIMIT.
CLAIM_SETTINGS = ("SET LOCAL enable_bitmapscan = off",)

# A claim in a transaction of its own (the settle committed before it, in the same
# message: worker/round_trip.py) does not wait for its commit to reach the disk. A
# limited queue's claimers take turns on its lock until each one's commit, and a commit
# that waits for the disk holds the lock for that long: on a machine whose flush takes a
# millisecond, as long as the claim itself. What the claim risks is only itself: if
# Postgres crashes within the moment (wal_writer_delay, 200 ms by default) before its
# commit is flushed, the claim is undone and its jobs run again, as the jobs of a worker
# that died do. It cannot outlive its own jobs' settles: their commits do wait for the
# disk, and a flush writes everything before it, the claim included.
CLAIM_COMMIT = "SET LOCAL synchronous_commit = off"


# Claim up to %(limit)s runnable jobs from unpaused queues, best first (priority,
# then run time, then id), and lease them for the queue's lock duration.
# - Each queue is read through the claim index; SKIP LOCKED lets claimers take
#   disjoint rows without waiting.
# - A limited queue (one with a cap, a rate limit or group caps) with a runnable job:
#   before anything of it is read, queue_engine_limited_counts() (schema/claim.sql, in
#   `counted`) takes the queue's advisory lock and counts its running jobs and its rate
#   budgets' starts by group key, once, with a fresh snapshot. Those counts give the
#   queue's room (q.room), the keys already at their cap or out of their budget
#   (q.full_keys) and each candidate key's room (`ranked`), all exact. Claimers of a
#   limited queue take turns for the whole claim, and each counts the others'
#   committed claims. A queue with group caps alone takes turns too: try-locking its
#   keys one by one instead would leave the second of two claimers ranking the same
#   head of the queue with no room on any key.
# - Keys already at their cap or out of their own rate budget (q.full_keys) are
#   passed over when candidates are read: a busy key's backlog
#   would otherwise fill every claim's candidates and starve the other keys. Their
#   waiting jobs are still walked in the claim index, so a backlog of millions on one
#   capped key makes claims of its queue slower, never stuck.
# - A fair queue (QueueSettings.fair_share) needs the full claim (`limited`), but its
#   lock only if it has caps (`capped`): without, its claimers count nothing the others
#   could change, and the worker's lanes claim it side by side (the `fair` marker).
#   Beside its walk from the head, it reads the next jobs of each key with runnable
#   jobs (sql/shares.py, FAIR_CANDIDATES), and its jobs are taken in the order of their
#   key's turn (TURNS): a busy key's backlog fills no more than its share of a claim.
# - A worker with weighted queues (--queues a:3,b:1) sends CLAIM_WEIGHTED, which ranks
#   the jobs of its queues by turn before priority (sql/shares.py, WEIGHTS).
# - The labels test is written so the planner sees that most jobs require none.
# - Suspects (jobs rescued at least twice) are claimed only by a
#   claim `alone`, which a worker sends with a limit of 1 when nothing else of its
#   runs or is being claimed, and after which it claims nothing until the suspect has
#   ended; any other claim passes over them and reports their queues (`suspects`).
# - Jobs of a paused kind are passed over as they are walked, like a full key's: a
#   pause or a resume applies at every worker's next claim. A large backlog of a
#   paused kind at the head of a queue makes that queue's claims slower, never stuck.
# What a claim's walks of a queue pass over: jobs for other labels, suspects (but in a
# claim alone), full keys, paused kinds.
_FILTERS = """(labels = '{}' OR labels <@ %(labels)s::varchar[])
                   -- Suspects only in a claim alone (see above), which takes nothing else.
                   AND (rescues >= 2) = %(alone)s
                   AND (q.full_keys IS NULL OR COALESCE(group_key, '') <> ALL(q.full_keys))
                   AND (p.kinds IS NULL OR kind <> ALL(p.kinds))"""

# A priority above any job's (the qe_job_priority_range check): a floor there starts the
# claim at the head of the queue.
NO_FLOOR = 101

# The claim's parameters for no floor at all.
NO_FLOORS: dict[str, list[object]] = {
    "floor_queues": [],
    "floor_priorities": [],
    "floor_run_ats": [],
    "floor_ids": [],
}

_HEAD = """
WITH floors AS (
    -- Where this worker's claims of each queue start (worker/floors.py): past the
    -- jobs it has seen claimed, whose entries stay in the claim index until vacuum
    -- removes them. While a long transaction holds vacuum back, a claim from the head
    -- of the index visits every one of them; from its floor, none.
    SELECT * FROM unnest(%(floor_queues)s::varchar[], %(floor_priorities)s::int[],
                         %(floor_run_ats)s::timestamptz[], %(floor_ids)s::bigint[])
           AS f(queue, priority, run_at, id)
), {configs}, paused AS (
    -- Kinds an operator paused (the kill switch, ops.pause_kind): their jobs stay queued.
    SELECT array_agg(kind) AS kinds FROM queue_engine_kindcontrol WHERE paused{counted}
), q AS (
    SELECT c.name, c.lock_duration, c.group_concurrency, c.rate_limit, c.max_concurrency,
           c.rate_window, c.rate_limit_per_key, c.grouped, c.fair_share AS fair,
{full_keys} AS full_keys,
           c.capped,
           -- A fair queue without caps needs the full claim, not the queue's lock.
           (c.capped OR c.fair_share) AS limited,
           -- No floor (a priority above any job's, so the scan below the floor's
           -- priority reads the whole queue) for a queue without one, and for a
           -- limited queue: a job its limits pass over must be read again when they
           -- let it through, and nothing would lower the floor then.
           CASE WHEN f.queue IS NULL OR c.capped OR c.fair_share
                THEN {no_floor} ELSE f.priority END AS floor_priority,
           COALESCE(f.run_at, '-infinity') AS floor_run_at, COALESCE(f.id, 0) AS floor_id,
{room} AS room
      FROM configs c
      LEFT JOIN floors f ON f.queue = c.name
), candidates AS (
    SELECT j.*, q.lock_duration, q.group_concurrency, q.grouped, q.capped, q.room, q.fair,
           q.rate_limit_per_key, q.rate_limit
      FROM q CROSS JOIN paused p CROSS JOIN LATERAL (
            -- The floor's priority past the floor, then the lower priorities: two
            -- walks of the claim index, each from where its range starts. Only the
            -- room: every extra row is locked and ranked while the queue's claimers
            -- wait. A key with less room than jobs among them leaves the claim short,
            -- and the worker claims again in 10 ms (`held`), passing over the keys
            -- this one filled.
            WITH ahead AS (
                SELECT id, queue, group_key, priority, run_at
                  FROM queue_engine_job
                 WHERE state = 'available' AND queue = q.name AND priority = q.floor_priority
                   AND (run_at, id) > (q.floor_run_at, q.floor_id) AND run_at <= now()
                   AND {filters}
                 ORDER BY run_at, id
                 LIMIT q.room
                   FOR UPDATE SKIP LOCKED
            )
            SELECT * FROM ahead
             UNION ALL
            SELECT * FROM (
                SELECT id, queue, group_key, priority, run_at
                  FROM queue_engine_job
                 WHERE state = 'available' AND queue = q.name AND priority < q.floor_priority
                   AND run_at <= now()
                   AND {filters}
                 ORDER BY priority DESC, run_at, id
                 LIMIT q.room - (SELECT count(*) FROM ahead)
                   FOR UPDATE SKIP LOCKED
            ) below
           ) j
     WHERE q.room > 0{fair_candidates}"""


_COUNTED = """
), counted AS MATERIALIZED (
    -- The limited queues' running jobs and starts by key, counted once under their
    -- locks (queue_engine_limited_counts, schema/claim.sql), before anything is read
    -- from them: the claim's rooms below are exact, and it reads and locks no more
    -- candidates than they let it take. Only queues with a runnable job are locked, so
    -- that a worker which also serves an empty limited queue does not wait its turn.
    SELECT * FROM queue_engine_limited_counts(ARRAY(
        SELECT c.name FROM configs c
         WHERE c.capped{unfair} AND EXISTS (SELECT 1 FROM queue_engine_job j
                        WHERE j.state = 'available' AND j.queue = c.name
                          AND j.run_at <= now())))
"""

_FULL_KEYS = """
           -- Keys already at their cap, held at 0, or out of their own rate budget: their
           -- waiting jobs are passed over when candidates are read, so that a busy key
           -- with a backlog never fills the candidates and starves the other keys.
           CASE WHEN c.grouped THEN (
               SELECT array_agg(f.group_key) FROM (
                   SELECT n.group_key FROM counted n
                     LEFT JOIN queue_engine_grouplimit g
                       ON g.queue = c.name AND g.group_key = n.group_key
                    WHERE n.queue = c.name AND n.group_key <> ''
                      AND n.running >= COALESCE(g.max_concurrency, c.group_concurrency)
                   UNION  -- keys held at 0, which run nothing
                   SELECT g.group_key FROM queue_engine_grouplimit g
                    WHERE g.queue = c.name AND g.max_concurrency = 0
                   UNION  -- keys ('' for jobs without one) that spent their own budget
                   SELECT n.group_key FROM counted n
                     LEFT JOIN queue_engine_grouplimit g
                       ON g.queue = c.name AND g.group_key = n.group_key
                    WHERE c.rate_limit_per_key AND n.queue = c.name
                      AND n.started >= COALESCE(g.rate_limit, c.rate_limit)) f)
           END"""

_ROOM = """
           -- The queue's room under its cap and its queue-wide rate limit, at most the
           -- claim's limit (the counts are exact: taken under the queue's lock).
           GREATEST(LEAST(
               %(limit)s,
               CASE WHEN c.max_concurrency IS NOT NULL THEN c.max_concurrency - (
                   SELECT COALESCE(sum(n.running), 0) FROM counted n WHERE n.queue = c.name)
               END,
               CASE WHEN c.rate_limit IS NOT NULL AND NOT c.rate_limit_per_key
                    THEN c.rate_limit - (
                   SELECT COALESCE(sum(n.started), 0) FROM counted n
                    WHERE n.queue = c.name AND n.group_key = '') END
           ), 0)"""


def _head(limits: bool, fair: bool) -> str:
    """The claim's start, up to its candidates. The plain claim passes limited queues
    over, so it needs neither their full keys nor a guess at their room (its room is
    the limit), and leaves out their subplans: Postgres sets up every subplan of a
    statement at each run, whether a queue uses it or not. For the same reason the
    claim without shares (`fair` false) passes fair queues over, and neither locks
    them nor reads their keys' candidates."""
    text = _HEAD.format(
        configs=CLAIM_CONFIGS,
        no_floor=NO_FLOOR,
        filters=_FILTERS,
        counted=_COUNTED.rstrip("\n").replace("{unfair}", "" if fair else " AND NOT c.fair_share")
        if limits
        else "",
        full_keys=_FULL_KEYS.strip("\n") if limits else "           NULL::varchar[]",
        room=_ROOM.strip("\n") if limits else "           %(limit)s::int",
        fair_candidates=(
            shares.FAIR_CANDIDATES.format(filters=_FILTERS, keys=shares.FAIR_KEYS)
            if limits and fair
            else ""
        ),
    )
    if not limits:
        return text + " AND NOT q.limited"
    return text if fair else text + " AND NOT q.fair"


# The plain claim's pick: the best candidates. No queue it reads has limits.
_PICK_PLAIN = """
), picked AS (
    SELECT c.id FROM candidates c ORDER BY c.priority DESC, c.run_at, c.id LIMIT %(limit)s
"""

_PICK_LIMITED = """
), ranked AS (
    -- Each candidate's place among its key's candidates, and its key's room: under the
    -- key's cap (the GroupLimit override, else the queue's default) and, where the rate
    -- limit applies per key, under the key's own budget, from the counts taken under
    -- the queue's lock. Key '' stands for the jobs without a key (no cap, one shared
    -- budget). No limit reads as 2147483647; a room is never negative.
    SELECT c.*,
           row_number() OVER (PARTITION BY c.queue, c.group_key
                              ORDER BY c.priority DESC, c.run_at, c.id) AS nth_in_group,
           GREATEST(LEAST(
               2147483647,
               COALESCE(g.max_concurrency,
                        CASE WHEN c.group_key IS NOT NULL THEN c.group_concurrency END)
                   - COALESCE(n.running, 0),
               CASE WHEN c.rate_limit_per_key
                    THEN COALESCE(g.rate_limit, c.rate_limit) - COALESCE(n.started, 0) END
           ), 0) AS key_room
      FROM candidates c
      LEFT JOIN queue_engine_grouplimit g
        ON c.grouped AND g.queue = c.queue AND g.group_key = COALESCE(c.group_key, '')
      LEFT JOIN counted n
        ON c.grouped AND n.queue = c.queue AND n.group_key = COALESCE(c.group_key, '')
{turns}), eligible AS (
    SELECT r.*,
           row_number() OVER (PARTITION BY r.queue
                              ORDER BY r.turn, r.priority DESC, r.spot, r.run_at, r.id)
               AS nth_in_queue,
           -- A fair queue's jobs go in the order of their turns among the other
           -- queues' jobs, all at the priority of the queue's best.
           max(r.priority) OVER (PARTITION BY r.queue) AS top
      FROM turns r
     WHERE NOT r.grouped OR (r.group_key IS NULL AND NOT r.rate_limit_per_key)
        OR r.nth_in_group <= r.key_room
{weights}), picked AS (
    -- The queue's room (q.room): exact for a limited queue, the claim's limit for
    -- the others.
    SELECT e.id FROM eligible e{join_weights}
     WHERE e.nth_in_queue <= e.room
     ORDER BY {by_weight}CASE WHEN e.fair THEN e.top ELSE e.priority END DESC,
              CASE WHEN e.fair THEN e.nth_in_queue END, e.priority DESC, e.run_at, e.id
     LIMIT %(limit)s
"""

_CLAIMED = """
), claimed AS (
    -- started_at is clock_timestamp(), not now(): this claim may share a transaction
    -- with a settle that began before a parent's settle committed, and a flow child
    -- must never look as if it started before its parent finished.
    UPDATE queue_engine_job j
       SET state = 'running', attempt = j.attempt + 1, lease_owner = %(worker)s,
           claim_token = %(token)s, started_at = clock_timestamp(), heartbeat_at = now(),
           lease_expires_at = now() + make_interval(secs => q.lock_duration),
           progress = NULL, progress_message = ''
      FROM q
     -- An array, not a join with picked: a generic plan cannot know how many rows
     -- picked holds, guesses thousands, and hashes the whole job table to join them.
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND q.name = j.queue
    RETURNING j.id, j.kind, j.queue, j.payload, j.attempt, j.max_attempts, j.backoff::text,
              j.flow_id, j.node_key, j.meta::text,
              {outputs} AS outputs,
              q.lock_duration,
              -- The durable steps earlier attempts recorded (ctx.step), so that a
              -- handler's first step needs no round trip of its own; looked up only for
              -- a job whose meta says it recorded some (sql.RECORD_STEPS marks it).
              CASE WHEN j.meta ? 'has_steps' THEN (
                  SELECT jsonb_object_agg(s.name, s.result)::text
                    FROM queue_engine_jobstep s WHERE s.job_id = j.id) END AS steps,
              j.priority, j.run_at,
              -- For the rate log only (the rows sent are _CLAIMED_ROWS' columns).
              j.group_key
""".replace("{outputs}", OUTPUTS)

_LOGGED_HELD = """
), logged AS (
    -- Starts are counted per span of a 600th of the rate window (at least 0.1 s), each
    -- row stamped with its span's end: a window's sum reads at most about 600 rows
    -- however many claims fell in it (with a row per claim, each sum would read every
    -- claim of the window, twice a claim, at any rate). A span reaching
    -- into the window counts whole: the limit errs by at most one span, towards fewer
    -- starts. The span is the one holding the latest clock read as the claimed rows
    -- arrive, each after its UPDATE, so the stamp is later than every start it counts;
    -- not now(): the claim's transaction may have begun well before, waiting for the
    -- queue's lock, and a stamp earlier than a start lets that start out of the window
    -- too soon (the proof is at queue_engine_limited_counts, schema/claim.sql).
    -- Under the key's own budget where the rate limit applies per key, else the
    -- queue's ('').
    INSERT INTO queue_engine_claimlog AS l (queue, group_key, at, count)
    SELECT claimed.queue, b.budget,
           to_timestamp(
               ((floor(extract(epoch FROM max(clock_timestamp())) / s.span) + 1) * s.span)::float8
           ),
           count(*)
      FROM claimed JOIN q ON q.name = claimed.queue
     -- Per key, spans of a 60th: each claim of the queue sums every key's window to
     -- find the keys out of budget (q.full_keys), and that read grows with the keys.
     CROSS JOIN LATERAL (
           SELECT GREATEST(q.rate_window / CASE WHEN q.rate_limit_per_key THEN 60.0
                                                ELSE 600.0 END, 0.1) AS span) s
     CROSS JOIN LATERAL (SELECT CASE WHEN q.rate_limit_per_key
                                     THEN COALESCE(claimed.group_key, '')
                                     ELSE '' END AS budget) b
     WHERE q.rate_limit IS NOT NULL OR q.rate_limit_per_key
     GROUP BY claimed.queue, b.budget, s.span
        ON CONFLICT (queue, group_key, at) DO UPDATE SET count = l.count + EXCLUDED.count
), held AS (
    -- Queues this claim read candidates of and left some (a cap, a busy key's room, the
    -- rate limit) while it took fewer jobs than it wanted. The worker claims again soon
    -- (worker/lanes.py, HELD_BACK_FIRST) instead of at its next poll: the next claim
    -- passes over the keys this one filled. Counted from what the claim already holds:
    -- a look into the queue for more work, under the queue's lock, would lengthen
    -- every claim of a limited queue, and the lock's turns with it.
    SELECT c.queue FROM candidates c
     WHERE (SELECT count(*) FROM picked) < %(limit)s
       AND c.id <> ALL(ARRAY(SELECT id FROM picked))
     GROUP BY c.queue
), rate_waits AS (
    -- Rate-limited queues whose limits this claim met while it took fewer jobs than it
    -- wanted (candidates left, keys passed over, no room guessed): how long until the
    -- oldest span of their window leaves it, when room may come back. The worker claims
    -- again then (worker/lanes.py), or at its next poll if that comes first.
    SELECT q.name,
           ceil(1000 * extract(epoch FROM min(l.at) + make_interval(secs => q.rate_window)
                                          - clock_timestamp()))::int AS wait_ms
      FROM q JOIN queue_engine_claimlog l ON l.queue = q.name
     WHERE (q.rate_limit IS NOT NULL OR q.rate_limit_per_key)
       AND (SELECT count(*) FROM picked) < %(limit)s
       AND (q.room = 0 OR q.full_keys IS NOT NULL OR q.name IN (SELECT queue FROM held))
       AND l.at > clock_timestamp() - make_interval(secs => q.rate_window)
     GROUP BY q.name, q.rate_window
"""

_MARKERS = """
), limited AS (
    -- Queues with caps this claim looked at, full or not: their claimers take turns on
    -- the queue's lock, so the worker sends one claim at a time while it serves them
    -- (worker/round_trip.py, ClaimState.serial).
    SELECT q.name FROM q WHERE q.capped
), suspects AS (
    -- Queues where a suspect this worker could run is due: if the worker takes the
    -- queue's right, it claims nothing more until its jobs have ended, and claims
    -- alone (worker/quarantine.py). Read through qe_job_suspect, which holds only suspects.
    SELECT q.name FROM q
     WHERE NOT %(alone)s AND EXISTS (
           SELECT 1 FROM queue_engine_job s
            WHERE s.rescues >= 2 AND s.queue = q.name AND s.state = 'available'
              AND s.run_at <= now()
              AND s.kind <> ALL(COALESCE((SELECT kinds FROM paused), '{}'))
              AND (s.labels = '{}' OR s.labels <@ %(labels)s::varchar[]))
)
"""

_CLAIMED_ROWS = """
SELECT id, kind, queue, payload, attempt, max_attempts, backoff, flow_id, node_key, meta,
       outputs, lock_duration, steps, priority, run_at
  FROM claimed
 UNION ALL  -- marker rows, no id: one per queue, the queue in its place, the marker as kind"""

_HELD_ROWS = """
SELECT NULL, 'held', h.queue, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM held h
 UNION ALL  -- the milliseconds to wait in the attempt's place
SELECT NULL, 'rate', r.name, NULL, r.wait_ms, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM rate_waits r
 UNION ALL"""

_MARKER_ROWS = """
SELECT NULL, 'limited', l.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM limited l
 UNION ALL
-- Fair queues: claimed by the full claim (sql.CLAIM); from both lanes at once where
-- they have no caps (no `limited` marker).
SELECT NULL, 'fair', q.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM q WHERE q.fair
 UNION ALL
SELECT NULL, 'suspects', s.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM suspects s
 UNION ALL
-- A fan-out's children are left to count (FlowRange rows): a lane whose claim comes
-- back short counts them down next, and takes those it may run (sql.COUNT_DOWN_CLAIM).
SELECT NULL, 'release', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
 WHERE EXISTS (SELECT 1 FROM queue_engine_flowrange)
"""


def _pick_limited(weighted: bool, fair: bool) -> str:
    """The full claim's pick, in the order of the worker's weights if it has some; with
    the turns of fair queues' keys if `fair`, else in the order of priority alone."""
    text = _PICK_LIMITED.replace("{turns}", shares.TURNS if fair else shares.NO_TURNS)
    if not fair:
        for with_turns, without in shares.UNFAIR_ORDER:
            if with_turns not in text:  # the ranking's text changed: fail at import
                raise ValueError(f"the claim's ranking no longer holds {with_turns!r}")
            text = text.replace(with_turns, without)
    for name, part in (
        ("{weights}", shares.WEIGHTS),
        ("{join_weights}", shares.JOIN_WEIGHTS),
        ("{by_weight}", shares.BY_WEIGHT),
    ):
        text = text.replace(name, part if weighted else "")
    return text


def _claim(limits: bool, weighted: bool = False, fair: bool = True) -> str:
    """The claim under every limit, or the plain one that passes over limited queues;
    with `fair` false, the claim under every limit but fair share, which passes fair
    queues over."""
    parts: tuple[str, ...]
    if limits:
        parts = (
            _head(True, fair),
            _pick_limited(weighted, fair),
            _CLAIMED,
            _LOGGED_HELD,
            _MARKERS,
            _CLAIMED_ROWS,
            _HELD_ROWS,
        )
    else:
        pick = shares.PICK_PLAIN_WEIGHTED if weighted else _PICK_PLAIN
        parts = (_head(False, False), pick, _CLAIMED, _MARKERS, _CLAIMED_ROWS)
    return "".join(part.rstrip("\n") for part in parts) + _MARKER_ROWS


CLAIM = _claim(limits=True)
# The claim while no queue in sight has limits (worker/lanes.py: the last claim said
# so): the same walks, without the ranking by group key, the rooms, the rate limit's
# log and the held-back check, each of which Postgres sets up and runs at every claim.
# A queue with limits is passed over and reported (`limited`), and the next claim is
# the full one.
CLAIM_PLAIN = _claim(limits=False)
# The two for a worker whose queues have weights (--queues a:3,b:1; worker/weights.py):
# they rank the jobs of its queues by turn before priority.
CLAIM_WEIGHTED = _claim(limits=True, weighted=True)
CLAIM_PLAIN_WEIGHTED = _claim(limits=False, weighted=True)
# The claim while no fair queue is in sight (the last claim said so): every limit, but
# neither the walk through a fair queue's keys nor the turns, which cost a claim of a
# queue with limits a tenth of its time even where no queue uses them. A fair queue is
# passed over and reported (`fair`), and the next claim is the full one.
CLAIM_UNFAIR = _claim(limits=True, fair=False)
CLAIM_UNFAIR_WEIGHTED = _claim(limits=True, weighted=True, fair=False)


# After a lost connection: the rows a claim with this token took if its commit
# went through unseen, so they run now instead of waiting for their lease.
RECOVER_CLAIM = """
SELECT j.id, j.kind, j.queue, j.payload, j.attempt, j.max_attempts, j.backoff::text,
       j.flow_id, j.node_key, j.meta::text,
       {outputs} AS outputs,
       extract(epoch FROM j.lease_expires_at - j.heartbeat_at)::int AS lock_duration,
       CASE WHEN j.meta ? 'has_steps' THEN (
           SELECT jsonb_object_agg(s.name, s.result)::text
             FROM queue_engine_jobstep s WHERE s.job_id = j.id) END AS steps,
       j.priority, j.run_at
  FROM queue_engine_job j
 WHERE j.state = 'running' AND j.claim_token = %(token)s AND j.lease_owner = %(worker)s
""".replace("{outputs}", OUTPUTS)


# The claim lanes' sessions. Their statements are prepared once per connection (see
# worker/script.py) and each is planned once too: under the default plan_cache_mode
# Postgres plans a prepared statement anew whenever its generic plan looks dearer than
# the custom ones, and for these statements (the claim, REFRESH_FLOWS) planning costs
# more than the custom plans save. All of them look rows up by key, so no sequential
# scan where an index serves: a plan made while a table was still empty would
# otherwise read the whole table for the life of the connection. The claim adds
# CLAIM_SETTINGS.
LANE_SETTINGS = (
    "SET plan_cache_mode = force_generic_plan",
    "SET enable_seqscan = off",
)
