-- Whether the lease holder's database session holds the run's advisory lock (taken with the
-- claim when free). While it does, a session that ends (the worker died, its link was cut)
-- frees the lock, and reconciliation takes the run at once instead of waiting out the lease;
-- a live but stalled worker keeps its session, so its run still waits for the lease.
ALTER TABLE runs ADD COLUMN lease_locked boolean NOT NULL DEFAULT false;
