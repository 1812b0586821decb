-- Named queries of the broken variant resume_own_runs (tests/quality/engines).

-- name: claim_own_run
-- BROKEN: a run leased to this worker id is taken to be this process's own, left by its
-- previous life: the lease is extended and kept, epoch and all, live or not. FOR UPDATE
-- waits for the holder's heartbeat instead of skipping the row.
UPDATE runs
SET lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_ms)s / 1000.0),
    updated_at = clock_timestamp()
WHERE id = (SELECT id FROM runs
            WHERE status = 'running' AND lease_owner = %(worker_id)s
            ORDER BY updated_at
            LIMIT 1
            FOR UPDATE)
RETURNING id, lease_epoch, attempts;
