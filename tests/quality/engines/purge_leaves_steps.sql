-- Named queries of the broken variant purge_leaves_steps (tests/quality/engines): a store
-- of model answers keyed by run key and turn, kept apart from the run's own records, as
-- DBOS keeps transaction_outputs in the application database.

-- name: lock_step_outputs
SELECT pg_advisory_xact_lock(769);

-- name: create_step_outputs
CREATE TABLE IF NOT EXISTS step_outputs (
    run_key text NOT NULL,
    turn    integer NOT NULL,
    answer  jsonb NOT NULL,
    PRIMARY KEY (run_key, turn)
);

-- name: step_output
SELECT s.answer FROM step_outputs s JOIN runs r ON r.run_key = s.run_key
WHERE r.id = %(run_id)s AND s.turn = %(turn)s;

-- name: record_step_output
INSERT INTO step_outputs (run_key, turn, answer)
SELECT r.run_key, %(turn)s, %(answer)s FROM runs r WHERE r.id = %(run_id)s
ON CONFLICT (run_key, turn) DO NOTHING;

-- name: run_key_of
SELECT run_key FROM runs WHERE id = %(run_id)s;

-- name: purge_step_outputs
DELETE FROM step_outputs WHERE run_key = %(run_key)s;
