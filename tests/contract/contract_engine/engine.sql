-- The contract engine's schema and every statement it sends, by name (store.py loads them).
-- Fencing: every writing statement of a worker names its lease (owner, epoch); a claim
-- bumps the epoch, so a worker that lost its lease matches no row and commits nothing.

-- name: schema
CREATE TABLE runs (
    id               text PRIMARY KEY,
    run_key          text NOT NULL UNIQUE,
    status           text NOT NULL DEFAULT 'pending',
    reason           text,
    attempts         int NOT NULL DEFAULT 0,
    max_attempts     int NOT NULL,
    owner            text,
    epoch            bigint NOT NULL DEFAULT 0,
    lease_until      timestamptz,
    phase            text,
    version          int NOT NULL DEFAULT 0,
    turn             int NOT NULL DEFAULT 0,
    transcript       jsonb NOT NULL,
    iterations_used  int NOT NULL DEFAULT 0,
    iterations_limit int NOT NULL,
    tool_calls_used  int NOT NULL DEFAULT 0,
    tool_calls_limit int NOT NULL,
    tokens_used      bigint NOT NULL DEFAULT 0,
    tokens_limit     bigint NOT NULL,
    reply            text,
    delivery_state   text NOT NULL DEFAULT 'none',
    delivery_key     text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- One row per checkpoint, written with it: the durable record `export` gives the harness.
CREATE TABLE checkpoints (
    run_id  text NOT NULL REFERENCES runs (id),
    version int NOT NULL,
    phase   text NOT NULL,
    PRIMARY KEY (run_id, version)
);
CREATE TABLE model_calls (
    run_id text NOT NULL REFERENCES runs (id),
    seq    int NOT NULL,
    turn   int NOT NULL,
    state  text NOT NULL,  -- pending | recorded | interrupted | failed
    usage  jsonb,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE tool_calls (
    run_id      text NOT NULL REFERENCES runs (id),
    turn        int NOT NULL,
    idx         int NOT NULL,
    call_id     text NOT NULL,
    name        text NOT NULL,
    arguments   jsonb,         -- null when the model's arguments were not a JSON object
    key         text NOT NULL UNIQUE,
    state       text NOT NULL,  -- reserved | started | succeeded | failed | outcome_unknown | rejected
    fingerprint text,
    outcome     jsonb,          -- the content of the tool message, once settled
    PRIMARY KEY (run_id, turn, idx)
);

-- name: submit
INSERT INTO runs (id, run_key, max_attempts, transcript, iterations_limit, tool_calls_limit,
                  tokens_limit)
VALUES (%(id)s, %(run_key)s, %(max_attempts)s, %(messages)s, %(iterations)s, %(tool_calls)s,
        %(tokens)s)
ON CONFLICT (run_key) DO NOTHING;

-- name: run_by_key
SELECT id FROM runs WHERE run_key = %(run_key)s;

-- name: claim
UPDATE runs
   SET owner = %(owner)s, epoch = epoch + 1, attempts = attempts + 1, status = 'running',
       lease_until = clock_timestamp() + %(lease_ms)s * interval '1 millisecond'
 WHERE id = (SELECT id FROM runs
              WHERE status IN ('pending', 'running')
                AND (lease_until IS NULL OR lease_until < clock_timestamp())
              ORDER BY created_at
              LIMIT 1
                FOR UPDATE SKIP LOCKED)
RETURNING id, epoch, attempts, max_attempts;

-- name: fence
-- Renews the lease and returns the run, only while this worker still holds it.
UPDATE runs
   SET lease_until = clock_timestamp() + %(lease_ms)s * interval '1 millisecond'
 WHERE id = %(run_id)s AND owner = %(owner)s AND epoch = %(epoch)s AND status = 'running'
RETURNING *;

-- name: interrupt_model_calls
UPDATE model_calls SET state = 'interrupted' WHERE run_id = %(run_id)s AND state = 'pending';

-- name: reserve_model_call
INSERT INTO model_calls (run_id, seq, turn, state)
SELECT %(run_id)s, coalesce(max(seq), -1) + 1, %(turn)s, 'pending'
  FROM model_calls WHERE run_id = %(run_id)s
RETURNING seq;

-- name: fail_model_call
UPDATE model_calls SET state = 'failed' WHERE run_id = %(run_id)s AND seq = %(seq)s;

-- name: record_model_call
UPDATE model_calls SET state = 'recorded', usage = %(usage)s
 WHERE run_id = %(run_id)s AND seq = %(seq)s AND state = 'pending';

-- name: checkpoint
-- One checkpoint: the frontier moves to a new phase and its version grows by one.
WITH moved AS (
UPDATE runs
   SET phase = %(phase)s, version = version + 1,
       iterations_used = iterations_used + %(iterations)s,
       tokens_used = tokens_used + %(tokens)s,
       turn = turn + %(turns)s,
       transcript = transcript || %(messages)s,
       reply = coalesce(%(reply)s, reply),
       delivery_state = coalesce(%(delivery_state)s, delivery_state),
       delivery_key = coalesce(%(delivery_key)s, delivery_key)
 WHERE id = %(run_id)s
RETURNING id, version, phase
)
INSERT INTO checkpoints (run_id, version, phase) SELECT id, version, phase FROM moved
RETURNING version, phase;

-- name: export_checkpoints
SELECT run_id, version, phase FROM checkpoints WHERE run_id = %(run_id)s ORDER BY version;

-- name: bill_tokens
UPDATE runs SET tokens_used = tokens_used + %(tokens)s WHERE id = %(run_id)s;

-- name: add_tool_call
INSERT INTO tool_calls (run_id, turn, idx, call_id, name, arguments, key, state)
VALUES (%(run_id)s, %(turn)s, %(idx)s, %(call_id)s, %(name)s, %(arguments)s, %(key)s,
        'reserved');

-- name: tool_calls_of_turn
SELECT call_id, name, arguments, key, state, fingerprint, outcome
  FROM tool_calls WHERE run_id = %(run_id)s AND turn = %(turn)s ORDER BY idx;

-- name: start_tool_call
UPDATE tool_calls SET state = 'started', fingerprint = %(fingerprint)s
 WHERE run_id = %(run_id)s AND key = %(key)s;

-- name: use_tool_budget
UPDATE runs SET tool_calls_used = tool_calls_used + 1 WHERE id = %(run_id)s;

-- name: settle_tool_call
UPDATE tool_calls SET state = %(state)s, outcome = %(outcome)s
 WHERE run_id = %(run_id)s AND key = %(key)s;

-- name: set_delivery
UPDATE runs SET delivery_state = %(delivery_state)s WHERE id = %(run_id)s;

-- name: release
-- Gives the run back (CONTRACT.md s. 5, "Attempts and dead letters"): nobody holds it, and
-- it may be claimed again, a new attempt, once the backoff passed.
UPDATE runs
   SET status = 'pending', owner = NULL,
       lease_until = clock_timestamp() + %(backoff_ms)s * interval '1 millisecond'
 WHERE id = %(run_id)s;

-- name: finish
UPDATE runs
   SET status = %(status)s, reason = %(reason)s, lease_until = NULL,
       delivery_state = coalesce(%(delivery_state)s, delivery_state)
 WHERE id = %(run_id)s;

-- name: report_run
SELECT * FROM runs WHERE id = %(run_id)s;

-- name: report_model_calls
SELECT turn, state, usage FROM model_calls WHERE run_id = %(run_id)s ORDER BY seq;

-- name: report_tool_calls
SELECT call_id, name, key, state, turn FROM tool_calls
 WHERE run_id = %(run_id)s ORDER BY turn, idx;
