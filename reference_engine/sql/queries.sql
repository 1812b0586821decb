-- Named queries of the reference engine, parsed once by reference_engine.sqlfile.
-- Every block starts with `-- name: <identifier>`; parameters use psycopg's %(name)s.

-- name: create_run
INSERT INTO runs (run_key, input, budget_iterations, budget_tool_calls, budget_tokens,
                  max_attempts)
VALUES (%(run_key)s, %(input)s, %(iterations)s, %(tool_calls)s, %(tokens)s, %(max_attempts)s)
ON CONFLICT (run_key) DO NOTHING
RETURNING id;

-- name: run_id_by_key
SELECT id FROM runs WHERE run_key = %(run_key)s;

-- name: insert_frontier
INSERT INTO frontiers (run_id, version, phase, checkpoint, checkpoint_version)
VALUES (%(run_id)s, 1, %(phase)s, %(checkpoint)s, %(checkpoint_version)s);

-- name: insert_events
-- A transaction's events in one statement, in the order they happened. (Not executemany:
-- its pipeline leaves idle_in_transaction_session_timeout unarmed.)
INSERT INTO events (run_id, kind, worker_id, lease_epoch, data)
SELECT (e->>'run_id')::uuid, e->>'kind', e->>'worker_id', (e->>'lease_epoch')::bigint,
       e->'data'
FROM jsonb_array_elements(%(events)s) WITH ORDINALITY AS t(e, n)
ORDER BY n;

-- name: claim_run
-- One claim per transaction; SKIP LOCKED spreads workers over runs without waiting.
-- `lease_locked`: this session also takes the run's session-level advisory lock (key
-- 0x63726174 "crat", hashtext(run id)) when it is free, which Postgres frees the moment the
-- session ends; a stalled previous holder may still hold it, and then only the lease counts.
WITH candidate AS (
    SELECT id FROM runs
    WHERE status = 'pending' AND available_at <= now() AND attempts < max_attempts
    ORDER BY available_at
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE runs r
SET status = 'running',
    lease_owner = %(worker_id)s,
    lease_epoch = r.lease_epoch + 1,
    lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_ms)s / 1000.0),
    attempts = r.attempts + 1,
    lease_locked = pg_try_advisory_lock(1668440436, hashtext(r.id::text)),
    updated_at = clock_timestamp()
FROM candidate
WHERE r.id = candidate.id
RETURNING r.id, r.lease_epoch, r.attempts, r.lease_locked;

-- name: extend_lease
-- One autocommit statement: a heartbeat never leaves a transaction open on the run row.
WITH extended AS (
    UPDATE runs
    SET lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_ms)s / 1000.0)
    WHERE id = %(run_id)s AND status = 'running' AND lease_owner = %(worker_id)s
      AND lease_epoch = %(lease_epoch)s AND lease_expires_at > clock_timestamp()
    RETURNING id, lease_epoch
)
INSERT INTO events (run_id, kind, worker_id, lease_epoch)
SELECT id, 'run.lease_extended', %(worker_id)s, lease_epoch FROM extended
RETURNING run_id;

-- name: lock_run
-- `lease_left_ms`: while this row lock is held nobody can extend or take the lease, so the
-- worker can tell locally, without another round trip, whether it still runs at COMMIT.
SELECT id, status, lease_owner, lease_epoch, cancel_requested_at IS NOT NULL AS cancel_requested,
       lease_expires_at > clock_timestamp() AS lease_live,
       EXTRACT(EPOCH FROM (lease_expires_at - clock_timestamp())) * 1000 AS lease_left_ms,
       attempts, max_attempts
FROM runs WHERE id = %(run_id)s
FOR UPDATE;

-- name: relock_run
-- A new session of the holder takes the run's advisory lock again (see claim_run); the lease
-- is read afterwards, in a later snapshot, so a reconciliation that took the lock first is seen.
SELECT pg_try_advisory_lock(1668440436, hashtext(%(run_id)s::text)) AS locked;

-- name: unlock_run
SELECT pg_advisory_unlock(1668440436, hashtext(%(run_id)s::text)) AS unlocked;

-- name: lease_still_live
-- `remaining_ms`: how long the lease still runs as the server sees it now; the worker
-- subtracts the round trip, since a slow link can deliver a stale "yes".
SELECT lease_owner = %(worker_id)s AND lease_epoch = %(lease_epoch)s
       AND lease_expires_at > clock_timestamp() AS live,
       EXTRACT(EPOCH FROM (lease_expires_at - clock_timestamp())) * 1000 AS remaining_ms
FROM runs WHERE id = %(run_id)s;

-- name: load_run
SELECT id, run_key, status, reason, input, budget_iterations, budget_tool_calls,
       budget_tokens, attempts, max_attempts, lease_owner, lease_epoch,
       cancel_requested_at IS NOT NULL AS cancel_requested
FROM runs WHERE id = %(run_id)s;

-- name: advance_frontier
-- Compare-and-set on the version: a stale view of the run cannot move its frontier.
UPDATE frontiers
SET version = version + 1, phase = %(phase)s, checkpoint = %(checkpoint)s,
    checkpoint_version = %(checkpoint_version)s
WHERE run_id = %(run_id)s AND version = %(expected_version)s
RETURNING version;

-- name: charge_budget
INSERT INTO budget_ledger (run_id, kind, amount, ref)
VALUES (%(run_id)s, %(kind)s, %(amount)s, %(ref)s)
ON CONFLICT (run_id, kind, ref) DO NOTHING
RETURNING id;

-- name: interrupt_model_call
UPDATE model_calls SET state = 'interrupted', finished_at = clock_timestamp(),
       error = %(error)s
WHERE id = %(call_id)s AND state = 'pending'
RETURNING id;

-- name: insert_model_call
INSERT INTO model_calls (id, run_id, turn, attempt, lease_epoch)
VALUES (%(call_id)s, %(run_id)s, %(turn)s, %(attempt)s, %(lease_epoch)s);

-- name: record_model_call
UPDATE model_calls SET state = 'recorded', response = %(response)s, usage = %(usage)s,
       finished_at = clock_timestamp()
WHERE id = %(call_id)s AND state = 'pending' AND lease_epoch = %(lease_epoch)s
RETURNING id;

-- name: fail_model_call
UPDATE model_calls SET state = 'failed', error = %(error)s, finished_at = clock_timestamp()
WHERE id = %(call_id)s AND state = 'pending'
RETURNING id;

-- name: insert_tool_call
INSERT INTO tool_calls (run_id, turn, position, tool_call_id, name, arguments,
                        idempotency_key, declaration, state, outcome, settled_at)
VALUES (%(run_id)s, %(turn)s, %(position)s, %(tool_call_id)s, %(name)s, %(arguments)s,
        %(key)s, %(declaration)s, %(state)s, %(outcome)s,
        CASE WHEN %(state)s = 'reserved' THEN NULL ELSE clock_timestamp() END)
RETURNING id;

-- name: start_tool_call
UPDATE tool_calls
SET state = 'started', started_epoch = %(lease_epoch)s, attempts = attempts + 1,
    updated_at = clock_timestamp()
WHERE id = %(command_id)s AND run_id = %(run_id)s
  AND (state = 'reserved' OR (state = 'awaiting_approval' AND approval = 'approved')
       OR (state = 'started' AND started_epoch <= %(lease_epoch)s))
RETURNING id;

-- name: await_approval
UPDATE tool_calls SET state = 'awaiting_approval', updated_at = clock_timestamp()
WHERE id = %(command_id)s AND run_id = %(run_id)s AND state = 'reserved'
RETURNING id;

-- name: settle_tool_call
-- Never a call started under a newer epoch than ours (row-level fencing on top of the
-- run lock); an older epoch's call is settled by the recovery rules.
UPDATE tool_calls
SET state = %(state)s, outcome = %(outcome)s, settled_at = clock_timestamp(),
    updated_at = clock_timestamp()
WHERE id = %(command_id)s AND run_id = %(run_id)s AND state = 'started'
  AND started_epoch <= %(lease_epoch)s
RETURNING id;

-- name: cancel_open_tool_calls
UPDATE tool_calls
SET state = 'cancelled', settled_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND state IN ('reserved', 'awaiting_approval', 'started')
RETURNING id;

-- name: interrupt_open_model_calls
UPDATE model_calls SET state = 'interrupted', finished_at = clock_timestamp(),
       error = %(error)s
WHERE run_id = %(run_id)s AND state = 'pending'
RETURNING id;

-- name: insert_delivery
INSERT INTO deliveries (run_id, key, content) VALUES (%(run_id)s, %(key)s, %(content)s);

-- name: mark_delivery_sending
UPDATE deliveries SET state = 'sending', attempts = attempts + 1, updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND state IN ('pending', 'sending')
RETURNING attempts;

-- name: mark_delivery_delivered
UPDATE deliveries SET state = 'delivered', delivered_at = clock_timestamp(),
       updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND state = 'sending'
RETURNING run_id;

-- name: mark_delivery_uncertain
UPDATE deliveries SET state = 'uncertain', updated_at = clock_timestamp()
WHERE run_id = %(run_id)s AND state IN ('pending', 'sending')
RETURNING run_id;

-- name: finish_run
-- Terminal: lease cleared in the same statement (CHECK runs_running_iff_leased).
UPDATE runs
SET status = %(status)s, reason = %(reason)s, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = %(run_id)s AND status IN ('pending', 'running', 'waiting')
RETURNING id;

-- name: release_run
UPDATE runs
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL,
    available_at = clock_timestamp() + make_interval(secs => %(delay_ms)s / 1000.0),
    updated_at = clock_timestamp()
WHERE id = %(run_id)s AND status = 'running'
RETURNING id;

-- name: park_run
-- Waiting for an operator: no lease, not claimable until approve/reject.
UPDATE runs
SET status = 'waiting', lease_owner = NULL, lease_expires_at = NULL,
    updated_at = clock_timestamp()
WHERE id = %(run_id)s AND status = 'running'
RETURNING id;

-- name: request_cancel
UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, clock_timestamp()),
       updated_at = clock_timestamp()
WHERE id = %(run_id)s
RETURNING status, lease_owner IS NOT NULL AS leased;

-- name: lock_run_plain
SELECT id, status, lease_owner, lease_epoch, cancel_requested_at IS NOT NULL AS cancel_requested
FROM runs WHERE id = %(run_id)s FOR UPDATE;

-- name: lock_tool_call
SELECT id, run_id, tool_call_id, state, approval FROM tool_calls
WHERE id = %(command_id)s FOR UPDATE;

-- name: approve_tool_call
UPDATE tool_calls SET approval = 'approved', updated_at = clock_timestamp()
WHERE id = %(command_id)s AND state = 'awaiting_approval' AND approval IS NULL
RETURNING id;

-- name: reject_tool_call
UPDATE tool_calls
SET approval = 'rejected', state = 'rejected', outcome = %(outcome)s,
    settled_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = %(command_id)s AND state = 'awaiting_approval' AND approval IS NULL
RETURNING id;

-- name: wake_run
UPDATE runs SET status = 'pending', available_at = clock_timestamp(),
       updated_at = clock_timestamp()
WHERE id = %(run_id)s AND status = 'waiting'
RETURNING id;

-- name: expired_leases
-- Runs whose holder stopped heartbeating, or whose holder's session ended (it took the run's
-- advisory lock with the claim, and the lock is free now: the transaction-level try takes it
-- until COMMIT, so the holder cannot take it back meanwhile; a lock this very session
-- holds is its own, not free); rows locked by a live transaction are skipped. CASE fixes
-- the order: the lock is looked at only for unexpired leases.
SELECT id, lease_owner, lease_epoch, attempts, max_attempts,
       cancel_requested_at IS NOT NULL AS cancel_requested,
       lease_expires_at >= clock_timestamp() AS session_ended
FROM runs
WHERE status = 'running'
  AND CASE WHEN lease_expires_at < clock_timestamp() THEN true
           WHEN NOT lease_locked THEN false
           WHEN EXISTS (SELECT 1 FROM pg_locks l
                        WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                          AND l.classid = 1668440436::oid
                          AND l.objid = hashtext(runs.id::text)::oid AND l.objsubid = 2)
               THEN false
           ELSE pg_try_advisory_xact_lock(1668440436, hashtext(id::text)) END
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: work_waiting
-- An idle worker's poll, one autocommit statement, no row locked: could a reconcile or a
-- claim find anything? True for every run a pass might take: a pending run (claimable now,
-- or dead-lettered for want of attempts), a lapsed lease, and one whose holder's advisory
-- lock nobody holds any more (its session ended). When false, neither pass could act; when
-- true, they run as before and decide. Only where this says false is a poll cheaper.
SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'pending')
    OR EXISTS (
        SELECT 1 FROM runs
        WHERE status = 'running'
          AND CASE WHEN lease_expires_at < clock_timestamp() THEN true
                   WHEN NOT lease_locked THEN false
                   ELSE NOT EXISTS (SELECT 1 FROM pg_locks l
                                    WHERE l.locktype = 'advisory' AND l.granted
                                      AND l.classid = 1668440436::oid
                                      AND l.objid = hashtext(runs.id::text)::oid
                                      AND l.objsubid = 2) END) AS waiting;

-- name: exhausted_pending
-- Released runs that have used all their attempts can never be claimed again.
SELECT id FROM runs
WHERE status = 'pending' AND attempts >= max_attempts
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: expire_checkpoint_history
-- Retention: keep only the current version of checkpoints of long-finished runs.
WITH doomed AS (
    SELECT c.run_id, c.version FROM checkpoints c
    JOIN runs r ON r.id = c.run_id
    JOIN frontiers f ON f.run_id = c.run_id
    WHERE r.finished_at < clock_timestamp() - make_interval(secs => %(retention_s)s)
      AND c.version < f.version
    LIMIT %(limit)s
)
DELETE FROM checkpoints c USING doomed
WHERE c.run_id = doomed.run_id AND c.version = doomed.version;

-- name: lock_migrations
-- Serialises concurrent `migrate` commands until the transaction ends.
SELECT pg_advisory_xact_lock(%(lock)s);

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS engine_migrations (
    number integer PRIMARY KEY, name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now());

-- name: applied_migrations
SELECT number FROM engine_migrations;

-- name: record_migration
INSERT INTO engine_migrations (number, name) VALUES (%(number)s, %(name)s);

-- name: read_only_snapshot
-- Export reads every table from one snapshot.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: find_tool_call
SELECT run_id FROM tool_calls WHERE id = %(command_id)s;

-- name: find_tool_call_of_run
-- By the model's tool-call id, as clients know a call; the latest turn if ever repeated.
SELECT id FROM tool_calls WHERE run_id = %(run_id)s AND tool_call_id = %(tool_call_id)s
ORDER BY turn DESC, position DESC LIMIT 1;

-- name: export_runs
SELECT * FROM runs WHERE id = %(run_id)s;

-- name: export_checkpoints
SELECT * FROM checkpoints WHERE run_id = %(run_id)s ORDER BY version;

-- name: export_model_calls
SELECT * FROM model_calls WHERE run_id = %(run_id)s ORDER BY turn, attempt;

-- name: export_tool_calls
SELECT * FROM tool_calls WHERE run_id = %(run_id)s ORDER BY turn, position;

-- name: export_budget_ledger
SELECT * FROM budget_ledger WHERE run_id = %(run_id)s ORDER BY id;

-- name: export_deliveries
SELECT * FROM deliveries WHERE run_id = %(run_id)s;

-- name: export_events
SELECT * FROM events WHERE run_id = %(run_id)s ORDER BY id;

-- name: load_state
-- Everything the decision needs in one statement: one round trip, one snapshot.
SELECT
    (SELECT to_jsonb(r) FROM (
        SELECT id, status, reason, budget_iterations, budget_tool_calls, budget_tokens,
               attempts, max_attempts, lease_owner, lease_epoch,
               cancel_requested_at IS NOT NULL AS cancel_requested
        FROM runs WHERE id = %(run_id)s) r) AS run,
    (SELECT to_jsonb(f) FROM (
        SELECT version, phase, checkpoint, checkpoint_version
        FROM frontiers WHERE run_id = %(run_id)s) f) AS frontier,
    (SELECT coalesce(jsonb_agg(m ORDER BY m.turn, m.attempt), '[]'::jsonb) FROM (
        SELECT id, turn, attempt, lease_epoch, state, usage
        FROM model_calls WHERE run_id = %(run_id)s) m) AS model_calls,
    (SELECT coalesce(jsonb_agg(t ORDER BY t.turn, t.position), '[]'::jsonb) FROM (
        SELECT id, turn, position, tool_call_id, name, arguments, idempotency_key,
               declaration, state, approval, outcome, started_epoch, attempts
        FROM tool_calls WHERE run_id = %(run_id)s) t) AS tool_calls,
    (SELECT coalesce(jsonb_object_agg(kind, used), '{}'::jsonb) FROM (
        SELECT kind, sum(amount)::bigint AS used
        FROM budget_ledger WHERE run_id = %(run_id)s GROUP BY kind) b) AS budget_used,
    (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, ref)), '[]'::jsonb)
        FROM budget_ledger WHERE run_id = %(run_id)s AND kind <> 'tokens') AS charged,
    (SELECT to_jsonb(d) FROM (
        SELECT key, state, attempts FROM deliveries WHERE run_id = %(run_id)s) d) AS delivery;

-- name: purge_run
-- Retention of one finished run: the run row and, by ON DELETE CASCADE, every record of it
-- (frontier, checkpoints, model and tool calls, budget ledger, delivery, events) in this
-- one statement, so no step record outlives its run and the run key is free again.
DELETE FROM runs WHERE id = %(run_id)s;
